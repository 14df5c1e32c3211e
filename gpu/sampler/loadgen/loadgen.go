// Package loadgen drives a serving engine with the load τ² puts on it and reports how close the
// engine came to the hardware's limit for that exact load (issue 28).
//
// A τ² step is many conversations at once: Groups tasks × Samples samples each (AReaL: 16 × 8),
// every conversation starting with the domain's system prompt and tool list (Sys tokens, shared by
// all), then the task's opening (Task tokens, shared by a group's samples), then Turns calls, each
// resending the whole history (token mode) to generate ~Gen tokens before the environment appends
// ~Reply tokens of user or tool text. BenchmarkDecode's fixed batch of equal contexts looks nothing
// like this; this load is what decides how fast rollouts are.
//
// Run drives any Client (SGLang's /generate over HTTP — tau2-sampler, SGLang, or vLLM's SGLang-
// compatible route — or an engine in process) and returns a Result; Floors computes what the
// hardware allows for the load that actually ran, two ways: every sequence reading its own KV
// (what a paged decode kernel does), and shared prefixes read once per step (what cascade /
// shared-prefix attention does).
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"tau2rl/gpu"
)

// Shape is the load: conversations, their shared prefixes and their turns.
type Shape struct {
	Groups  int `json:"groups"`  // tasks
	Samples int `json:"samples"` // conversations per task
	Turns   int `json:"turns"`   // calls per conversation
	Sys     int `json:"sys"`     // system prefix tokens shared by every conversation
	Task    int `json:"task"`    // task prefix tokens shared by a group's conversations
	Gen     int `json:"gen"`     // mean tokens generated per call
	GenSD   int `json:"gen_sd"`  // their standard deviation (Gaussian, clamped to [1, 3·Gen])
	Reply   int `json:"reply"`   // tokens appended after each call (user or tool text)
	// Vocab bounds the synthetic token ids ([10, Vocab)); the generated ids are the engine's.
	Vocab int    `json:"vocab"`
	Seed  uint64 `json:"seed"`
}

// Tau2Shape is the reference load: 8 tasks × 8 samples, a 5,000-token system prefix,
// 300-token task prefixes, 6 calls of ~150 generated (sd 50) + 200 appended tokens.
func Tau2Shape() Shape {
	return Shape{Groups: 8, Samples: 8, Turns: 6, Sys: 5000, Task: 300, Gen: 150, GenSD: 50, Reply: 200, Vocab: 151000, Seed: 1}
}

// Validate rejects shapes that cannot run.
func (s Shape) Validate() error {
	switch {
	case s.Groups < 1 || s.Samples < 1 || s.Turns < 1:
		return fmt.Errorf("loadgen: groups %d, samples %d and turns %d must be ≥ 1", s.Groups, s.Samples, s.Turns)
	case s.Sys < 0 || s.Task < 0 || s.Reply < 0 || s.GenSD < 0:
		return errors.New("loadgen: sys, task, reply and gen_sd must be ≥ 0")
	case s.Gen < 1:
		return fmt.Errorf("loadgen: gen %d must be ≥ 1", s.Gen)
	case s.Sys+s.Task == 0:
		return errors.New("loadgen: the first prompt is empty (sys + task = 0)")
	case s.Vocab <= 10:
		return fmt.Errorf("loadgen: vocab %d must be > 10", s.Vocab)
	}
	return nil
}

// Conversations is Groups × Samples.
func (s Shape) Conversations() int { return s.Groups * s.Samples }

// MaxContext is the longest prompt + completion the shape can reach (every call at 3·Gen).
func (s Shape) MaxContext() int { return s.Sys + s.Task + s.Turns*(3*s.Gen+s.Reply) }

// Call is one generation request.
type Call struct {
	InputIDs     []int32
	MaxNewTokens int
	Seed         uint64
}

// Reply is a Client's answer.
type Reply struct {
	OutputIDs []int32
	// CachedTokens is how many prompt tokens the server's prefix cache supplied (-1: unknown).
	CachedTokens int
}

// Client serves calls (SGLang's /generate in token mode, or an engine in process). It must be
// safe for concurrent use.
type Client interface {
	Generate(ctx context.Context, c Call) (Reply, error)
}

// KVReporter is a Client that can tell how much of its KV cache is in use (blocks used, total,
// block size); Run samples it while the load runs.
type KVReporter interface {
	KVUsage(ctx context.Context) (used, total, blockSize int, err error)
}

// CallStat is one call as it ran.
type CallStat struct {
	Conversation, Turn int
	Prompt, Output     int
	Cached             int
	Latency            time.Duration
}

// Result is what Run measured.
type Result struct {
	Shape Shape         `json:"-"`
	Wall  time.Duration `json:"-"`
	Calls []CallStat    `json:"-"`
	// Totals and rates.
	NumCalls      int     `json:"calls"`
	OutputTokens  int64   `json:"output_tokens"`
	PromptTokens  int64   `json:"prompt_tokens"`
	CachedTokens  int64   `json:"cached_tokens"`
	CallsPerS     float64 `json:"calls_per_s"`
	OutputTokPerS float64 `json:"output_tok_per_s"`
	PromptTokPerS float64 `json:"prompt_tok_per_s"`
	CachedShare   float64 `json:"cached_share"` // cached / prompt tokens (-1: the server did not say)
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
	// KV use sampled while the load ran (blocks × block size), when the client reports it.
	KVPeakTokens  int `json:"kv_peak_tokens,omitempty"`
	KVTotalTokens int `json:"kv_total_tokens,omitempty"`
}

// gauss draws a generation length.
func (s Shape) genLen(rng *rand.Rand) int {
	g := float64(s.Gen) + rng.NormFloat64()*float64(s.GenSD)
	return max(1, min(3*s.Gen, int(math.Round(g))))
}

func randIDs(rng *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(10 + rng.IntN(vocab-10))
	}
	return out
}

// Run plays the shape against c: every conversation at once, each conversation's calls one after
// another (the environment answers between them), as a τ² step's rollouts do. The token ids and
// lengths are drawn from Shape.Seed, so two runs (or two servers) get the same load; the
// generated ids are the server's own (ignore_eos, temperature 1, so every call generates its
// drawn length).
func Run(ctx context.Context, c Client, s Shape) (*Result, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x7a75))
	sys := randIDs(rng, s.Sys, s.Vocab)
	tasks := make([][]int32, s.Groups)
	for g := range tasks {
		tasks[g] = randIDs(rng, s.Task, s.Vocab)
	}
	n := s.Conversations()
	// Per conversation: its generation lengths and replies, drawn up front (deterministic).
	type plan struct {
		gens    []int
		replies [][]int32
		seed    uint64
	}
	plans := make([]plan, n)
	for i := range plans {
		p := plan{seed: rng.Uint64() >> 2} // SGLang reads sampling_seed as a signed int
		for range s.Turns {
			p.gens = append(p.gens, s.genLen(rng))
			p.replies = append(p.replies, randIDs(rng, s.Reply, s.Vocab))
		}
		plans[i] = p
	}
	var (
		mu    sync.Mutex
		stats []CallStat
		errs  []error
		peak  int
		total int
		bs    int
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sampler sync.WaitGroup
	if kr, ok := c.(KVReporter); ok {
		sampler.Go(func() {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				used, tot, b, err := kr.KVUsage(ctx)
				if err != nil {
					continue
				}
				mu.Lock()
				peak, total, bs = max(peak, used), tot, b
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			hist := slices.Concat(sys, tasks[i/s.Samples])
			p := plans[i]
			for turn := range s.Turns {
				t0 := time.Now()
				rep, err := c.Generate(ctx, Call{InputIDs: hist, MaxNewTokens: p.gens[turn], Seed: p.seed + uint64(turn)})
				lat := time.Since(t0)
				if err == nil && len(rep.OutputIDs) != p.gens[turn] {
					err = fmt.Errorf("generated %d tokens, asked for %d with ignore_eos", len(rep.OutputIDs), p.gens[turn])
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("conversation %d turn %d: %w", i, turn, err))
					mu.Unlock()
					cancel()
					return
				}
				mu.Lock()
				stats = append(stats, CallStat{Conversation: i, Turn: turn, Prompt: len(hist), Output: len(rep.OutputIDs),
					Cached: rep.CachedTokens, Latency: lat})
				mu.Unlock()
				hist = slices.Concat(hist, rep.OutputIDs, p.replies[turn])
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cancel()
	sampler.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("loadgen: %d calls failed, first: %w", len(errs), errs[0])
	}
	r := &Result{Shape: s, Wall: wall, Calls: stats, NumCalls: len(stats)}
	unknown := false
	lats := make([]float64, len(stats))
	for i, c := range stats {
		r.OutputTokens += int64(c.Output)
		r.PromptTokens += int64(c.Prompt)
		if c.Cached < 0 {
			unknown = true
		}
		r.CachedTokens += int64(max(0, c.Cached))
		lats[i] = c.Latency.Seconds() * 1e3
	}
	sec := wall.Seconds()
	r.CallsPerS = float64(r.NumCalls) / sec
	r.OutputTokPerS = float64(r.OutputTokens) / sec
	r.PromptTokPerS = float64(r.PromptTokens) / sec
	r.CachedShare = float64(r.CachedTokens) / float64(max(1, r.PromptTokens))
	if unknown {
		r.CachedShare = -1
	}
	r.P50MS, r.P99MS = Percentile(lats, 0.50), Percentile(lats, 0.99)
	r.KVPeakTokens, r.KVTotalTokens = peak*bs, total*bs
	return r, nil
}

// Percentile is the q-quantile of xs by the nearest-rank method (0 for none).
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(len(s)-1, k))]
}

// Hardware is what bounds a step: the device's copy bandwidth (bytes read + written per second
// of a device-to-device copy, the convention of BenchmarkDecode's floors) and its dense bf16
// matmul rate, both measured on the card.
type Hardware struct {
	CopyBytesPerS float64 `json:"copy_gb_s_x1e9"`
	MatmulFLOPs   float64 `json:"matmul_tflops_x1e12"`
}

// Floor is the least time the load that ran can take on the hardware, and the output rate that
// gives, two ways.
//
// Decode: every generated token is one row of a decode step that reads the model's weights (once
// per step for the whole batch) and the keys and values of the token's context. Steps are counted
// as if every conversation decoded in lockstep: total output tokens / conversations (the fewest
// steps the load allows). PerSeq reads each row's whole context (a paged kernel reading each
// sequence's own blocks); Shared reads the system prefix once per step and each task prefix once
// per step for its group (cascade attention), the rest per row.
//
// Prefill: the prompt tokens the prefix cache did not supply (measured), at 2 FLOPs per weight
// per token plus 4·head_dim per visible (query, key) pair and head, at the matmul rate.
//
// The floor adds the decode bandwidth time and the prefill compute time (the two kinds of work
// contend for the same chip; overlapping them perfectly would lower the floor by at most the
// smaller of the two).
type Floor struct {
	Steps            float64 `json:"steps"`
	WeightBytes      float64 `json:"weight_bytes"`
	KVBytesPerSeq    float64 `json:"kv_bytes_per_seq"`
	KVBytesShared    float64 `json:"kv_bytes_shared"`
	PrefillFLOPs     float64 `json:"prefill_flops"`
	PerSeqS          float64 `json:"floor_s_per_seq"`
	SharedS          float64 `json:"floor_s_shared"`
	PerSeqTokPerS    float64 `json:"floor_tok_per_s_per_seq"`
	SharedTokPerS    float64 `json:"floor_tok_per_s_shared"`
	KVTokensPerSeq   int64   `json:"kv_tokens_needed_per_seq"` // every conversation's final context, unshared
	KVTokensShared   int64   `json:"kv_tokens_needed_shared"`  // with the prefixes held once
	OverSharedFloor  float64 `json:"over_shared_floor"`        // measured wall / shared floor
	OverPerSeqFloor  float64 `json:"over_per_seq_floor"`
	DecodeSharedS    float64 `json:"decode_s_shared"`
	DecodePerSeqS    float64 `json:"decode_s_per_seq"`
	PrefillComputeS  float64 `json:"prefill_s"`
	PrefillNewTokens int64   `json:"prefill_new_tokens"`
}

// Floors computes the floors of the load r ran, for model cfg on hw.
func Floors(cfg gpu.Config, r *Result, hw Hardware) Floor {
	s := r.Shape
	kvB := float64(cfg.KVBytesPerToken(2))
	var wb float64
	for _, p := range gpu.ParamSpecs(cfg) {
		wb += 2 * float64(p.Size())
	}
	H, I, L := float64(cfg.HiddenSize), float64(cfg.IntermediateSize), float64(cfg.NumHiddenLayers)
	qd, kvd := float64(cfg.QDim()), float64(cfg.KVDim())
	layerFLOPs := 2 * L * (H*(qd+2*kvd) + qd*H + 3*H*I) // per token
	f := Floor{WeightBytes: wb}
	shared := float64(s.Sys + s.Task)
	final := map[int]int{}
	for _, c := range r.Calls {
		// decode rows: the token generated j-th sees prompt + j positions (j = 0: the prefill's
		// own row, counted with the decode rows since it reads the same context).
		for j := range c.Output {
			ctx := float64(c.Prompt + j)
			f.KVBytesPerSeq += ctx * kvB
			f.KVBytesShared += (ctx - shared) * kvB
		}
		newTok := c.Prompt - max(0, c.Cached)
		f.PrefillNewTokens += int64(newTok)
		// the new tokens' attention over everything before them
		pairs := float64(newTok)*float64(c.Prompt-newTok) + float64(newTok)*float64(newTok+1)/2
		f.PrefillFLOPs += float64(newTok)*layerFLOPs + 4*L*qd*pairs
		final[c.Conversation] = max(final[c.Conversation], c.Prompt+c.Output)
	}
	conv := float64(max(1, s.Conversations()))
	f.Steps = float64(r.OutputTokens) / conv
	f.KVBytesShared += f.Steps * (float64(s.Sys) + float64(s.Groups)*float64(s.Task)) * kvB
	for _, n := range final {
		f.KVTokensPerSeq += int64(n)
		f.KVTokensShared += int64(n - s.Sys - s.Task)
	}
	f.KVTokensShared += int64(s.Sys + s.Groups*s.Task)
	if hw.CopyBytesPerS > 0 {
		f.DecodePerSeqS = (f.Steps*wb + f.KVBytesPerSeq) / hw.CopyBytesPerS
		f.DecodeSharedS = (f.Steps*wb + f.KVBytesShared) / hw.CopyBytesPerS
	}
	if hw.MatmulFLOPs > 0 {
		f.PrefillComputeS = f.PrefillFLOPs / hw.MatmulFLOPs
	}
	f.PerSeqS = f.DecodePerSeqS + f.PrefillComputeS
	f.SharedS = f.DecodeSharedS + f.PrefillComputeS
	if f.PerSeqS > 0 {
		f.PerSeqTokPerS = float64(r.OutputTokens) / f.PerSeqS
		f.OverPerSeqFloor = r.Wall.Seconds() / f.PerSeqS
	}
	if f.SharedS > 0 {
		f.SharedTokPerS = float64(r.OutputTokens) / f.SharedS
		f.OverSharedFloor = r.Wall.Seconds() / f.SharedS
	}
	return f
}

// Record is one run's JSON line (docs/perf/*.jsonl): the fields first, then the rest.
type Record struct {
	Model                string  `json:"model"`
	Card                 string  `json:"card"`
	Groups               int     `json:"groups"`
	Samples              int     `json:"samples"`
	Turns                int     `json:"turns"`
	Sys                  int     `json:"sys"`
	Task                 int     `json:"task"`
	Gen                  int     `json:"gen"`
	Reply                int     `json:"reply"`
	OutputTokPerS        float64 `json:"output_tok_per_s"`
	CallsPerS            float64 `json:"calls_per_s"`
	P50MS                float64 `json:"p50_ms"`
	P99MS                float64 `json:"p99_ms"`
	CachedShare          float64 `json:"cached_share"`
	FloorTokPerSShared   float64 `json:"floor_tok_per_s_shared"`
	FloorTokPerSPerSeq   float64 `json:"floor_tok_per_s_per_seq"`
	Commit               string  `json:"commit"`
	PromptTokPerS        float64 `json:"prompt_tok_per_s"`
	WallS                float64 `json:"wall_s"`
	OutputTokens         int64   `json:"output_tokens"`
	KVPeakTokens         int     `json:"kv_peak_tokens,omitempty"`
	KVTotalTokens        int     `json:"kv_total_tokens,omitempty"`
	KVTokensNeededShared int64   `json:"kv_tokens_needed_shared"`
	KVTokensNeededPerSeq int64   `json:"kv_tokens_needed_per_seq"`
	CopyGBs              float64 `json:"copy_gb_s"`
	MatmulTFLOPs         float64 `json:"matmul_tflops"`
	OverSharedFloor      float64 `json:"over_shared_floor"`
	Server               string  `json:"server,omitempty"`
	Note                 string  `json:"note,omitempty"`
}

// NewRecord joins a run's result and floors into its record.
func NewRecord(model, card, commit string, r *Result, f Floor, hw Hardware) Record {
	s := r.Shape
	return Record{
		Model: model, Card: card, Groups: s.Groups, Samples: s.Samples, Turns: s.Turns, Sys: s.Sys, Task: s.Task,
		Gen: s.Gen, Reply: s.Reply, OutputTokPerS: r.OutputTokPerS, CallsPerS: r.CallsPerS, P50MS: r.P50MS,
		P99MS: r.P99MS, CachedShare: r.CachedShare, FloorTokPerSShared: f.SharedTokPerS,
		FloorTokPerSPerSeq: f.PerSeqTokPerS, Commit: commit, PromptTokPerS: r.PromptTokPerS, WallS: r.Wall.Seconds(),
		OutputTokens: r.OutputTokens, KVPeakTokens: r.KVPeakTokens, KVTotalTokens: r.KVTotalTokens,
		KVTokensNeededShared: f.KVTokensShared, KVTokensNeededPerSeq: f.KVTokensPerSeq,
		CopyGBs: hw.CopyBytesPerS / 1e9, MatmulTFLOPs: hw.MatmulFLOPs / 1e12, OverSharedFloor: f.OverSharedFloor,
	}
}

// Summary is the human-readable report of a run.
func Summary(r *Result, f Floor, hw Hardware) string {
	var b strings.Builder
	s := r.Shape
	fmt.Fprintf(&b, "load: %d groups × %d samples, %d turns, sys %d, task %d, gen %d±%d, reply %d\n",
		s.Groups, s.Samples, s.Turns, s.Sys, s.Task, s.Gen, s.GenSD, s.Reply)
	fmt.Fprintf(&b, "ran %d calls in %.2f s: %.2f calls/s, %.0f output tok/s, %.0f prompt tok/s\n",
		r.NumCalls, r.Wall.Seconds(), r.CallsPerS, r.OutputTokPerS, r.PromptTokPerS)
	if r.CachedShare >= 0 {
		fmt.Fprintf(&b, "prefix-cache hits: %.1f%% of prompt tokens\n", 100*r.CachedShare)
	} else {
		fmt.Fprintf(&b, "prefix-cache hits: not reported by the server\n")
	}
	fmt.Fprintf(&b, "per call: p50 %.0f ms, p99 %.0f ms (p99/p50 %.2f)\n", r.P50MS, r.P99MS, r.P99MS/math.Max(r.P50MS, 1e-9))
	if r.KVTotalTokens > 0 {
		fmt.Fprintf(&b, "KV cache: peak %d of %d tokens in use; the load needs %d (prefixes shared) / %d (unshared)\n",
			r.KVPeakTokens, r.KVTotalTokens, f.KVTokensShared, f.KVTokensPerSeq)
	} else {
		fmt.Fprintf(&b, "KV cache: the load needs %d tokens (prefixes shared) / %d (unshared)\n", f.KVTokensShared, f.KVTokensPerSeq)
	}
	if hw.CopyBytesPerS > 0 {
		fmt.Fprintf(&b, "hardware: copy %.0f GB/s, matmul %.0f TFLOP/s\n", hw.CopyBytesPerS/1e9, hw.MatmulFLOPs/1e12)
		fmt.Fprintf(&b, "floor, shared prefixes read once: %.2f s (decode %.2f + prefill %.2f) = %.0f tok/s; measured %.2f× it\n",
			f.SharedS, f.DecodeSharedS, f.PrefillComputeS, f.SharedTokPerS, f.OverSharedFloor)
		fmt.Fprintf(&b, "floor, per-sequence KV reads:       %.2f s (decode %.2f + prefill %.2f) = %.0f tok/s; measured %.2f× it\n",
			f.PerSeqS, f.DecodePerSeqS, f.PrefillComputeS, f.PerSeqTokPerS, f.OverPerSeqFloor)
	}
	return b.String()
}
