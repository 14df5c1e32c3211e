// Package sampler is tau2-sampler's engine: it turns generation requests into gpu.Decoder steps.
// One goroutine (Run) owns the decoder, the KV block pool (kvcache) and the prefix cache (radix)
// and, every step:
//
//  1. applies control commands (abort, pause, weight swap) between steps, never inside one;
//  2. schedules with continuous batching: every running request that is decoding gets its one
//     token first (a request whose block cannot be found preempts the newest running request —
//     itself if it is the newest — whose blocks are released and which is recomputed later, so a
//     full cache never fails a request); then requests still prefilling get chunks; then waiting
//     requests are admitted, oldest first, while the step's token budget (MaxStepTokens) and the
//     free blocks last. Long prompts are therefore prefilled a chunk per step beside the decoding
//     requests instead of stalling them;
//  3. runs the step, appends each sampled token with its log-prob and weight version, and ends
//     requests on a stop token, a stop string, max_new_tokens or the context length;
//  4. caches every newly filled block in the prefix cache, so later requests with the same prefix
//     (a τ² episode's next turn, another episode's system prompt) skip its prefill.
//
// Padded vocabulary: Qwen3 pads its embedding and LM head (vocab_size 151,936) beyond the
// tokenizer's 151,669 ids, and a badly trained policy can put mass on the padded rows. The engine
// never returns an id ≥ the sample vocabulary limit (Config.SampleVocabLimit): it rejects such a
// draw and, on the next step, re-feeds the request's last token at its own position (the same
// token at the same position over the same cached prefix writes the same keys and values, so the
// re-write is idempotent, even into a block the prefix cache already holds) and draws again with
// the next uniform of the request's stream. Accepted draws are therefore distributed exactly as
// the model's distribution conditioned on valid ids; the log-prob returned stays log softmax over
// the full vocabulary, which is what the trainer recomputes. After maxRejections rejections in a
// row (at once for greedy requests, whose argmax never changes) the request ends with finish
// reason abort. Without rejections the draws are those of an engine without the limit.
//
// Reproducibility: a request's k-th draw is Uniform(seed, k) and every row of a step is computed
// independently of the batch, so a request's tokens do not depend on batching, chunking, block
// size, the prefix cache or preemption (the invariance tests check each).
package sampler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/sampler/kvcache"
	"tau2rl/gpu/sampler/radix"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/logs"
)

// Config are the engine's scheduling limits.
type Config struct {
	// MaxRunning bounds the sequences in one step (default 256).
	MaxRunning int `yaml:"max_running"`
	// MaxStepTokens is the token budget of one step: decode tokens plus prefill chunks
	// (default 2048). Smaller keeps decode latency flat under long prompts; larger prefills faster.
	MaxStepTokens int `yaml:"max_step_tokens"`
	// ContextLength bounds prompt + completion (default and maximum: max_position_embeddings).
	ContextLength int `yaml:"context_length"`
	// PrefixCache enables the radix prefix cache (default true).
	PrefixCache *bool `yaml:"prefix_cache"`
	// EOSTokenIDs end generation unless a request ignores EOS (default: the config's eos_token_id).
	EOSTokenIDs []int32 `yaml:"eos_token_ids"`
	// WeightVersion is the version reported before the first reload (default "0").
	WeightVersion string `yaml:"weight_version"`
	// SampleVocabLimit: sampled ids ≥ this are rejected and redrawn (see the package doc).
	// Default: the tokenizer's vocabulary size when one is loaded, else the model's vocab_size.
	SampleVocabLimit int `yaml:"sample_vocab_limit"`
}

// maxRejections bounds the consecutive rejected draws of one request position (see the package
// doc); a model putting nearly all its mass on padded ids is broken and must not stall the engine.
const maxRejections = 32

func (c Config) withDefaults(mc gpu.Config) Config {
	if c.MaxRunning <= 0 {
		c.MaxRunning = 256
	}
	if c.MaxStepTokens <= 0 {
		c.MaxStepTokens = 2048
	}
	if c.ContextLength <= 0 || (mc.MaxPositionEmbeddings > 0 && c.ContextLength > mc.MaxPositionEmbeddings) {
		c.ContextLength = mc.MaxPositionEmbeddings
	}
	if c.PrefixCache == nil {
		t := true
		c.PrefixCache = &t
	}
	if c.EOSTokenIDs == nil {
		c.EOSTokenIDs = []int32{int32(mc.EOSTokenID)}
	}
	if c.WeightVersion == "" {
		c.WeightVersion = "0"
	}
	return c
}

// Engine schedules requests onto a Decoder. Submit, Abort, Pause, Resume, SwapWeights and Stats
// are safe for concurrent use; Run drives the decoder from one goroutine.
type Engine struct {
	dec    gpu.Decoder
	mcfg   gpu.Config
	cfg    Config
	tok    *tokenizer.Tokenizer
	log    *slog.Logger
	met    *Metrics
	bs     int
	ctxLen int
	limit  int // sampled ids ≥ limit are rejected

	mu       sync.Mutex
	incoming []*seq
	cmds     []func()
	closed   bool
	wake     chan struct{}
	stopped  chan struct{}
	stats    Stats
	seedRand *rand.Rand

	// Owned by the Run goroutine.
	pool     *kvcache.Pool
	tree     *radix.Tree
	waiting  []*seq // in arrival order (preempted requests go back to their place)
	running  []*seq // in arrival order
	version  string
	pause    pauseMode
	drained  []chan struct{} // Pause(wait) callers, told when nothing is in flight
	arrivals uint64
	steps    int
	gen      int
	rejected int
	decTime  time.Duration
	// busyTime and holdSince: where the wall clock went since started (busy.go).
	busyTime  BusyTime
	holdSince time.Time
	started   time.Time
}

type pauseMode int

const (
	notPaused  pauseMode = iota
	pauseDrain           // finish what was submitted, admit nothing new
	pauseHold            // run nothing; requests keep their KV (or were retracted)
)

// seq is a request in flight.
type seq struct {
	req      Request
	seed     uint64
	arrival  uint64
	tokens   []int32 // prompt + output
	out      []int32
	lps      []float32
	spans    []VersionSpan
	blocks   []int32
	computed int          // positions whose keys and values are in the cache
	inserted int          // blocks handed to the prefix cache
	cursor   radix.Cursor // where the last insert into the prefix cache ended
	cached   int
	first    bool // not yet admitted once
	retracts int
	textLen  int // bytes of detokenized output already searched for stop strings
	draws    int // uniforms used: len(out) plus rejected draws
	rejects  int // consecutive rejected draws at the current position
	done     chan Result
	finished bool
}

// Stats is a snapshot of the engine for /metrics and /get_model_info.
type Stats struct {
	Running, Waiting        int
	UsedBlocks, TotalBlocks int
	CachedBlocks            int
	Version                 string
	Paused                  bool
	// Steps and Generated count decoder steps and sampled tokens since start; DecoderTime is
	// the time spent inside Decoder.Step (the rest of a step's time is the engine's overhead).
	Steps, Generated int
	DecoderTime      time.Duration
	// Rejected counts draws of ids ≥ the sample vocabulary limit, discarded and redrawn.
	Rejected int
	// Busy is the time spent per phase since Started (busy.go); the rest of the wall clock
	// since Started is idle.
	Busy    BusyTime
	Started time.Time
}

// New builds an engine over dec. tok (optional) detokenizes for stop strings; met (optional)
// receives the metrics; log may be nil (discards).
func New(dec gpu.Decoder, cfg Config, tok *tokenizer.Tokenizer, met *Metrics, log *slog.Logger) (*Engine, error) {
	mc := dec.Config()
	kv := dec.KVSpec()
	if err := kv.Validate(); err != nil {
		return nil, fmt.Errorf("sampler: %w", err)
	}
	cfg = cfg.withDefaults(mc)
	if cfg.ContextLength <= 1 {
		return nil, fmt.Errorf("sampler: context length %d is too short", cfg.ContextLength)
	}
	log = logs.OrDiscard(log)
	limit := cfg.SampleVocabLimit
	switch {
	case limit < 0:
		return nil, fmt.Errorf("sampler: sample_vocab_limit %d must be ≥ 0 (0: default)", limit)
	case limit > mc.VocabSize:
		return nil, fmt.Errorf("sampler: sample_vocab_limit %d exceeds the model's vocab_size %d", limit, mc.VocabSize)
	case limit > 0 && tok != nil && limit > tok.VocabSize():
		return nil, fmt.Errorf("sampler: sample_vocab_limit %d exceeds the tokenizer's vocabulary size %d", limit, tok.VocabSize())
	case limit == 0 && tok != nil:
		limit = min(tok.VocabSize(), mc.VocabSize)
	case limit == 0:
		limit = mc.VocabSize
	}
	pool := kvcache.New(kv.NumBlocks)
	e := &Engine{
		dec: dec, mcfg: mc, cfg: cfg, tok: tok, log: log, met: met, bs: kv.BlockSize, ctxLen: cfg.ContextLength, limit: limit,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), pool: pool, tree: radix.New(pool, kv.BlockSize),
		version: cfg.WeightVersion, seedRand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		started: time.Now(),
	}
	e.stats = Stats{TotalBlocks: kv.NumBlocks, Version: e.version, Started: e.started}
	return e, nil
}

// ContextLength is the longest prompt + completion the engine serves.
func (e *Engine) ContextLength() int { return e.ctxLen }

// Capacity is the longest prompt + completion a request can have: the context length, or the
// whole KV pool if that is smaller.
func (e *Engine) Capacity() int { return min(e.ctxLen, e.pool.Total()*e.bs) }

// ModelConfig is the served model's configuration.
func (e *Engine) ModelConfig() gpu.Config { return e.mcfg }

// Tokenizer is the engine's tokenizer (nil when it has none).
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Submit queues a request and waits for it. If ctx ends first (the client went away) the
// request is aborted, its blocks are freed, and ctx's error is returned. A request the engine
// cannot serve returns an *InputError.
func (e *Engine) Submit(ctx context.Context, r Request) (Result, error) {
	if err := e.validate(&r); err != nil {
		return Result{}, err
	}
	s := &seq{req: r, tokens: slices.Clip(slices.Clone(r.Prompt)), first: true, done: make(chan Result, 1)}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Result{}, ErrClosed
	}
	if r.Seed != nil {
		s.seed = *r.Seed
	} else {
		s.seed = e.seedRand.Uint64()
	}
	e.incoming = append(e.incoming, s)
	e.mu.Unlock()
	e.poke()
	select {
	case res := <-s.done:
		return res, nil
	case <-e.stopped:
		select {
		case res := <-s.done:
			return res, nil
		default:
			return Result{}, ErrClosed
		}
	case <-ctx.Done():
		e.command(func() { e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: "client disconnected"}) })
		select {
		case <-s.done:
		case <-e.stopped:
		}
		return Result{}, ctx.Err()
	}
}

// command queues f to run on the engine goroutine between steps, without waiting.
func (e *Engine) command(f func()) {
	e.mu.Lock()
	e.cmds = append(e.cmds, f)
	e.mu.Unlock()
	e.poke()
}

// do runs f on the engine goroutine between steps and waits for it.
func (e *Engine) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.cmds = append(e.cmds, func() { f(); e.publishStats(); close(done) })
	e.mu.Unlock()
	e.poke()
	select {
	case <-done:
		return nil
	case <-e.stopped:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Abort ends the requests with the given id (all requests when all is set) with finish reason
// abort, and returns how many it ended.
func (e *Engine) Abort(ctx context.Context, id string, all bool, msg string) (int, error) {
	n := 0
	err := e.do(ctx, func() {
		e.pullIncoming()
		for _, s := range slices.Concat(e.running, e.waiting) {
			if all || s.req.ID == id {
				e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: msg})
				n++
			}
		}
	})
	return n, err
}

// Pause modes (SGLang /pause_generation, vLLM /pause).
const (
	PauseAbort   = "abort"    // abort everything in flight
	PauseRetract = "retract"  // stop; running requests drop their KV and are recomputed on resume
	PauseInPlace = "in_place" // stop; running requests keep their KV (vLLM "keep")
	PauseWait    = "wait"     // finish what is in flight, admit nothing new, then stop
)

// Pause stops generation in one of the Pause* modes; it returns once paused (for PauseWait, once
// the requests in flight have finished). Requests submitted meanwhile wait for Resume.
func (e *Engine) Pause(ctx context.Context, mode string) error {
	var drained chan struct{}
	err := e.do(ctx, func() {
		switch mode {
		case PauseAbort:
			e.pullIncoming()
			for _, s := range slices.Concat(e.running, e.waiting) {
				e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: "generation paused (abort)"})
			}
			e.pause = pauseHold
		case PauseRetract:
			e.retractAll()
			e.pause = pauseHold
		case PauseInPlace:
			e.pause = pauseHold
		case PauseWait:
			// Everything submitted so far is in flight and is finished, also when the engine
			// was held (in place or retracted) before.
			if e.pause != pauseDrain {
				e.pause = notPaused
				e.pullIncoming()
				e.pause = pauseDrain
			}
			drained = make(chan struct{})
			e.drained = append(e.drained, drained)
			e.checkDrained()
		}
	})
	if err != nil || drained == nil {
		return err
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Resume continues after Pause.
func (e *Engine) Resume(ctx context.Context) error {
	return e.do(ctx, func() {
		e.pause = notPaused
		for _, c := range e.drained {
			close(c)
		}
		e.drained = nil
	})
}

// SwapWeights makes the decoder serve w from the next step on, as weight version version. With
// abortAll, requests in flight end with finish reason abort; otherwise they are paused at the
// step boundary, their KV (computed with the old weights) is dropped and recomputed under the new
// weights, and they resume: their later tokens carry the new version in Result.Versions. The
// prefix cache is flushed (its entries are stale). If the decoder rejects w, nothing changes and
// the old weights keep serving.
func (e *Engine) SwapWeights(ctx context.Context, w *gpu.Weights, version string, abortAll bool) error {
	if err := gpu.SameArchitecture(e.mcfg, w.Config); err != nil {
		return err
	}
	_, err := e.swap(ctx, "disk", func() error { return e.dec.LoadWeights(w) }, version, abortAll)
	return err
}

// SwapWeightsIPC is SwapWeights with the weights copied from another process's CUDA IPC export
// on the same GPU (gpu.IPCWeightLoader), and returns the time the copy took. A decoder that cannot
// (the cpu one) refuses with gpu.ErrIPCUnsupported; a mismatched export is refused by the decoder
// before it copies anything. Either way the old weights and their version keep serving.
func (e *Engine) SwapWeightsIPC(ctx context.Context, x gpu.IPCExport, version string, abortAll bool) (time.Duration, error) {
	l, ok := e.dec.(gpu.IPCWeightLoader)
	if !ok {
		return 0, fmt.Errorf("sampler: %T decoder: %w", e.dec, gpu.ErrIPCUnsupported)
	}
	return e.swap(ctx, "ipc", func() error { return l.LoadWeightsIPC(x) }, version, abortAll)
}

// SwapWeightsWith is SwapWeights for weights that load puts into the decoder itself, from where
// the caller staged them (the weight-sync group's host or device staging buffer, gpu/weightsync);
// source labels tau2rl_sampler_weight_update_seconds. load runs on the engine's goroutine between
// two steps; if it fails, it must leave the old weights serving, and the version stays theirs.
func (e *Engine) SwapWeightsWith(ctx context.Context, source string, load func(gpu.Decoder) error, version string, abortAll bool) (time.Duration, error) {
	return e.swap(ctx, source, func() error { return load(e.dec) }, version, abortAll)
}

// Decoder is the engine's decoder, for what is safe to call outside the engine's goroutine
// (interface checks, a staging allocation); the weights change only through the Swap methods.
func (e *Engine) Decoder() gpu.Decoder { return e.dec }

// IPCDevice is the UUID of the GPU the decoder runs on when it can take weights by CUDA IPC
// (gpu.IPCWeightLoader), else an error wrapping gpu.ErrIPCUnsupported.
func (e *Engine) IPCDevice() (string, error) {
	l, ok := e.dec.(gpu.IPCWeightLoader)
	if !ok {
		return "", fmt.Errorf("sampler: %T decoder: %w", e.dec, gpu.ErrIPCUnsupported)
	}
	return l.DeviceUUID()
}

// swap runs load between two steps and, if it succeeds, switches to version and retracts or
// aborts what is in flight (SwapWeights). It returns load's duration, also recorded as
// tau2rl_sampler_weight_update_seconds{source}.
func (e *Engine) swap(ctx context.Context, source string, load func() error, version string, abortAll bool) (time.Duration, error) {
	var lerr error
	var took time.Duration
	if err := e.do(ctx, func() {
		if e.pause != pauseHold { // a hold counts as a whole (noteHold)
			defer func(t0 time.Time) { e.busy(PhaseWeightUpdate, time.Since(t0)) }(time.Now())
		}
		t0 := time.Now()
		lerr = load()
		took = time.Since(t0)
		if lerr != nil {
			return
		}
		e.met.weightUpdate(source, took)
		if version != "" {
			e.version = version
		}
		e.pullIncoming()
		if abortAll {
			for _, s := range slices.Concat(e.running, e.waiting) {
				e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: "aborted by a weight update"})
			}
		} else {
			e.retractAll()
		}
		e.tree.Flush()
		e.publishStats()
	}); err != nil {
		return 0, err
	}
	return took, lerr
}

// SetVersion changes the reported weight version without touching the weights.
func (e *Engine) SetVersion(ctx context.Context, version string) error {
	return e.do(ctx, func() { e.version = version; e.publishStats() })
}

// FlushCache empties the prefix cache.
func (e *Engine) FlushCache(ctx context.Context) error {
	return e.do(ctx, func() { e.tree.Flush(); e.publishStats() })
}

// Barrier returns once the engine has finished the step it was running, so that a following
// Stats reflects every request answered before the call.
func (e *Engine) Barrier(ctx context.Context) error { return e.do(ctx, func() {}) }

// Stats returns a snapshot (updated after every step and command).
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Close aborts every request and stops Run.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.cmds = append(e.cmds, func() {
		e.pause = notPaused
		e.pullIncoming()
		for _, s := range slices.Concat(e.running, e.waiting) {
			e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: "server shutting down"})
		}
	})
	e.closed = true
	e.mu.Unlock()
	e.poke()
}

// Done is closed when Run has returned.
func (e *Engine) Done() <-chan struct{} { return e.stopped }

// Run drives the decoder until Close (or ctx ends, which closes the engine). It returns the error
// of a failed step, after aborting every request (the decoder is then in an unknown state).
func (e *Engine) Run(ctx context.Context) error {
	defer close(e.stopped)
	stop := context.AfterFunc(ctx, e.Close)
	defer stop()
	for {
		e.mu.Lock()
		cmds := e.cmds
		e.cmds = nil
		closed := e.closed
		e.mu.Unlock()
		for _, f := range cmds {
			f()
		}
		e.noteHold()
		if len(cmds) > 0 {
			e.publishStats()
		}
		if closed {
			e.publishStats()
			return nil
		}
		if e.pause != pauseHold {
			e.pullIncoming()
		}
		batch := e.schedule()
		if len(batch) == 0 {
			e.publishStats()
			<-e.wake
			continue
		}
		if err := e.step(batch); err != nil {
			e.log.Error("decoder step failed; aborting every request", "err", err)
			for _, s := range slices.Concat(e.running, e.waiting) {
				e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: "internal error: " + err.Error()})
			}
			e.mu.Lock()
			e.closed = true
			e.mu.Unlock()
			return err
		}
		e.noteHold()
		e.publishStats()
	}
}

// pullIncoming moves submitted requests into the waiting queue (not while draining: those wait
// for Resume).
func (e *Engine) pullIncoming() {
	if e.pause == pauseDrain {
		return
	}
	e.mu.Lock()
	in := e.incoming
	e.incoming = nil
	e.mu.Unlock()
	for _, s := range in {
		if s.finished { // aborted before it was queued
			continue
		}
		e.arrivals++
		s.arrival = e.arrivals
		if s.req.MaxNewTokens == 0 {
			e.finishLength(s)
			continue
		}
		e.waiting = append(e.waiting, s)
	}
}

// work is one sequence's share of a step.
type work struct {
	s     *seq
	chunk int
}

// schedule picks this step's work (see the package doc). If nothing can run although requests
// are running — every one of them is prefilling and waits for a block — the newest is retracted
// and the step rescheduled, until the oldest runs (it always fits alone: validate checked).
func (e *Engine) schedule() []work {
	for {
		batch := e.scheduleOnce()
		if len(batch) > 0 || len(e.running) == 0 || e.pause == pauseHold {
			return batch
		}
		e.retract(e.running[len(e.running)-1])
	}
}

func (e *Engine) scheduleOnce() []work {
	if e.pause == pauseHold {
		return nil
	}
	budget := e.cfg.MaxStepTokens
	var batch []work
	// 1. Decoding requests, oldest first; each must get its token. When the cache is full the
	// newest running request is retracted (it is later in the list, so not yet in the batch).
	for i := 0; i < len(e.running); {
		s := e.running[i]
		if len(s.tokens)-s.computed != 1 || budget == 0 {
			i++
			continue
		}
		ok := true
		for ok && !e.grow(s, s.computed+1) {
			victim := e.running[len(e.running)-1]
			e.retract(victim)
			ok = victim != s
		}
		if !ok {
			continue // s was the newest and is retracted; nothing follows it
		}
		batch = append(batch, work{s, 1})
		budget--
		i++
	}
	// 2. Requests still prefilling get chunks.
	for _, s := range e.running {
		if len(s.tokens)-s.computed <= 1 || budget == 0 {
			continue
		}
		if n := e.growChunk(s, min(len(s.tokens)-s.computed, budget)); n > 0 {
			batch = append(batch, work{s, n})
			budget -= n
		}
	}
	// 3. Admission, oldest first, while the budget and the free blocks last.
	for len(e.waiting) > 0 && budget > 0 && len(e.running) < e.cfg.MaxRunning {
		s := e.waiting[0]
		e.admitPrefix(s)
		n := e.growChunk(s, min(len(s.tokens)-s.computed, budget))
		if n == 0 {
			e.release(s)
			if len(e.running) == 0 && len(batch) == 0 {
				// Nothing runs that could free a block and the prefix cache had nothing left to
				// evict: the head can never be admitted. End it rather than let it hold the
				// queue (validate keeps such requests out; this is the backstop).
				e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: fmt.Sprintf(
					"internal error: the request's next %d tokens cannot get a KV block although nothing else holds the cache",
					min(len(s.tokens)-s.computed, budget))})
				continue
			}
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		slices.SortFunc(e.running, func(a, b *seq) int { return cmp.Compare(a.arrival, b.arrival) })
		if s.first {
			s.first = false
			e.met.admitted(len(s.req.Prompt), s.cached)
		}
		batch = append(batch, work{s, n})
		budget -= n
	}
	return batch
}

// admitPrefix takes the longest cached prefix of s's tokens (leaving at least one token to
// compute, whose logits give the next draw).
func (e *Engine) admitPrefix(s *seq) {
	if !*e.cfg.PrefixCache || s.computed > 0 {
		return
	}
	m := e.tree.Match(s.tokens, (len(s.tokens)-1)/e.bs)
	s.blocks = append(s.blocks[:0], m...)
	s.computed = len(m) * e.bs
	s.inserted = len(m)
	s.cursor = radix.Cursor{}
	if s.first {
		s.cached = s.computed
	}
}

// alloc takes a block. When the pool is empty it evicts unreferenced prefix-cache blocks, a
// batch at a time (1/64 of the pool), so the tree is walked once per batch rather than per block.
func (e *Engine) alloc() (int32, bool) {
	if b, ok := e.pool.Alloc(); ok {
		return b, true
	}
	if e.tree.Evict(max(1, e.pool.Total()/64)) == 0 {
		return -1, false
	}
	return e.pool.Alloc()
}

// grow extends s's table to cover positions positions, or reports that the cache is full.
func (e *Engine) grow(s *seq, positions int) bool {
	for len(s.blocks)*e.bs < positions {
		b, ok := e.alloc()
		if !ok {
			return false
		}
		s.blocks = append(s.blocks, b)
	}
	return true
}

// growChunk extends s's table for up to want more positions and returns how many it covers.
func (e *Engine) growChunk(s *seq, want int) int {
	for len(s.blocks)*e.bs < s.computed+want {
		b, ok := e.alloc()
		if !ok {
			break
		}
		s.blocks = append(s.blocks, b)
	}
	return min(want, len(s.blocks)*e.bs-s.computed)
}

// release gives back s's blocks; its KV is gone and will be recomputed.
func (e *Engine) release(s *seq) {
	e.pool.ReleaseAll(s.blocks)
	s.blocks, s.computed, s.inserted, s.cursor = nil, 0, 0, radix.Cursor{}
}

// retract moves a running request back to the waiting queue, at its arrival position.
func (e *Engine) retract(s *seq) {
	e.release(s)
	s.retracts++
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	i, _ := slices.BinarySearchFunc(e.waiting, s.arrival, func(x *seq, a uint64) int { return cmp.Compare(x.arrival, a) })
	e.waiting = slices.Insert(e.waiting, i, s)
	e.met.retracted()
}

func (e *Engine) retractAll() {
	for len(e.running) > 0 {
		e.retract(e.running[len(e.running)-1])
	}
}

// insertFromRoot, set at link time only (go test -c -ldflags=-X
// tau2rl/gpu/sampler.insertFromRoot=1), makes every prefix-cache insert walk from the root as
// before issue 28's cursor, so a serving benchmark can run both in one device call. Empty in
// every build of the project.
var insertFromRoot string

// step runs the batch and applies its draws.
func (e *Engine) step(batch []work) error {
	start := time.Now() // the step's time, inputs to draws (busy.go)
	phase := stepPhase(batch)
	seqs := make([]gpu.ServeSeq, len(batch))
	ntok := 0
	for i, w := range batch {
		s := w.s
		end := s.computed + w.chunk
		seqs[i] = gpu.ServeSeq{Tokens: s.tokens[s.computed:end], Start: s.computed, Blocks: s.blocks, Sample: end == len(s.tokens), Params: s.req.Params}
		if seqs[i].Sample {
			seqs[i].Uniform = Uniform(s.seed, s.draws)
		}
		ntok += w.chunk
	}
	t0 := time.Now()
	out, err := e.dec.Step(seqs)
	e.decTime += time.Since(t0)
	if err != nil {
		return err
	}
	k, gen := 0, 0
	for i, w := range batch {
		s := w.s
		s.computed += w.chunk
		if *e.cfg.PrefixCache {
			if full := s.computed / e.bs; full > s.inserted {
				// From where this request's last insert ended: the walk covers the blocks
				// filled since, not the whole history.
				if insertFromRoot != "" {
					s.cursor = radix.Cursor{}
				}
				e.tree.InsertFrom(&s.cursor, s.tokens[:full*e.bs], s.blocks[:full])
				s.inserted = full
			}
		}
		if !seqs[i].Sample {
			continue
		}
		d := out[k]
		k++
		s.draws++
		if int(d.Token) >= e.limit {
			e.reject(s, d)
			continue
		}
		s.rejects = 0
		gen++
		e.appendToken(s, d)
	}
	e.steps++
	e.gen += gen
	took := time.Since(start)
	e.busy(phase, took)
	e.met.stepped(took, ntok, gen)
	e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.finished })
	e.checkDrained()
	return nil
}

// reject discards a draw of a padded id ≥ e.limit: the request's last token is marked
// uncomputed, so the next step re-feeds it at its own position (ServeSeq{Tokens: {last}, Start:
// len(tokens)-1}) and draws again with the next uniform. Its blocks already cover that position
// and a block the prefix cache holds is rewritten with the same keys and values, so neither the
// block table nor the cache changes.
func (e *Engine) reject(s *seq, d gpu.Sampled) {
	s.rejects++
	e.rejected++
	e.met.rejected()
	if s.rejects >= maxRejections || s.req.Params.Greedy() {
		e.log.Warn("model keeps sampling ids outside the vocabulary; ending the request",
			"id", s.req.ID, "token", d.Token, "limit", e.limit, "rejections", s.rejects)
		e.finish(s, FinishReason{Type: FinishAbort, MatchedToken: -1, Message: fmt.Sprintf(
			"internal error: the model sampled %d ids in a row outside the vocabulary [0, %d) (last %d)",
			s.rejects, e.limit, d.Token)})
		return
	}
	s.computed--
}

// appendToken records a draw and ends the request if it should stop.
func (e *Engine) appendToken(s *seq, d gpu.Sampled) {
	s.out = append(s.out, d.Token)
	s.lps = append(s.lps, d.LogProb)
	s.tokens = append(s.tokens, d.Token)
	if n := len(s.spans); n > 0 && s.spans[n-1].Version == e.version {
		s.spans[n-1].End++
	} else {
		s.spans = append(s.spans, VersionSpan{Version: e.version, Start: len(s.out) - 1, End: len(s.out)})
	}
	if slices.Contains(s.req.StopTokenIDs, d.Token) || !s.req.IgnoreEOS && slices.Contains(e.cfg.EOSTokenIDs, d.Token) {
		e.finish(s, FinishReason{Type: FinishStop, MatchedToken: d.Token})
		return
	}
	if len(s.req.StopStrings) > 0 {
		if m, ok := e.matchStop(s); ok {
			e.finish(s, FinishReason{Type: FinishStop, MatchedToken: -1, MatchedString: m})
			return
		}
	}
	if len(s.out) >= s.req.MaxNewTokens || len(s.tokens) >= e.ctxLen {
		e.finishLength(s)
	}
}

// matchStop looks for a stop string in the detokenized output, searching only text that could
// overlap the newest token.
func (e *Engine) matchStop(s *seq) (string, bool) {
	text, err := e.tok.Decode(s.out)
	if err != nil {
		return "", false
	}
	longest := 0
	for _, st := range s.req.StopStrings {
		longest = max(longest, len(st))
	}
	from := max(0, s.textLen-longest)
	s.textLen = len(text)
	best, at := "", len(text)+1
	for _, st := range s.req.StopStrings {
		if i := strings.Index(text[from:], st); i >= 0 && from+i < at {
			best, at = st, from+i
		}
	}
	return best, at <= len(text)
}

func (e *Engine) finishLength(s *seq) {
	e.finish(s, FinishReason{Type: FinishLength, MatchedToken: -1, Length: len(s.out)})
}

// finish answers a request and releases its blocks (its full blocks stay in the prefix cache).
func (e *Engine) finish(s *seq, why FinishReason) {
	if s.finished {
		return
	}
	s.finished = true
	e.release(s)
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
	res := Result{
		ID: s.req.ID, OutputIDs: slices.Clip(s.out), LogProbs: slices.Clip(s.lps), Finish: why,
		PromptTokens: len(s.req.Prompt), CachedTokens: s.cached, Versions: s.spans, Version: e.version,
		Retractions: s.retracts,
	}
	if res.OutputIDs == nil {
		res.OutputIDs, res.LogProbs = []int32{}, []float32{}
	}
	e.met.finished(why.Type)
	s.done <- res
	e.checkDrained()
}

// checkDrained tells Pause(wait) callers when nothing is in flight, and holds the engine.
func (e *Engine) checkDrained() {
	if e.pause != pauseDrain || len(e.running) > 0 || len(e.waiting) > 0 {
		return
	}
	e.pause = pauseHold
	for _, c := range e.drained {
		close(c)
	}
	e.drained = nil
}

func (e *Engine) publishStats() {
	st := Stats{
		Running: len(e.running), Waiting: len(e.waiting), TotalBlocks: e.pool.Total(),
		UsedBlocks: e.pool.Total() - e.pool.Free(), CachedBlocks: e.tree.Blocks(), Version: e.version,
		Paused: e.pause != notPaused, Steps: e.steps, Generated: e.gen, DecoderTime: e.decTime, Rejected: e.rejected,
		Busy: e.busyTime, Started: e.started,
	}
	e.mu.Lock()
	st.Waiting += len(e.incoming)
	e.stats = st
	e.mu.Unlock()
	e.met.observe(st)
}
