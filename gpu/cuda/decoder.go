//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"unsafe"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// Decoder is the CUDA gpu.Decoder: the policy's forward pass over a paged KV cache for the
// sampler's engine, with the training backend's kernels (embedding, RMSNorm, cuBLAS linear layers,
// q/k norm + RoPE, SwiGLU, residual add) so its log-probs match Backend.LogProbs, plus the serving
// kernels of csrc/paged_attention.cu and csrc/sample.cu.
//
// Device memory: the bf16 weights (one flat buffer, the trainer's layout), the KV cache — per layer
// a K and a V buffer of [NumBlocks·BlockSize slots][kv_heads·head_dim] bf16, so one token's keys
// of every KV head are contiguous and a block is one contiguous run — and a workspace sized by the
// largest step so far (grown on demand, never shrunk).
//
// A step runs, per layer: the new tokens' q/k/v; their keys and values into their cache slots; the
// FA2 tree-attention kernel over the step's own tokens (causal within each sequence's chunk, on the
// tensor cores); for sequences with cached context (Start > 0) the paged kernel over positions
// [0, Start), split over the key range so a small decode batch fills the chip, merged with the
// former by log-sum-exp (a decode-only step uses the paged kernel alone). The LM head then runs only
// on the rows that sample, and the sampler draws on the device; only (token, log-prob) pairs are
// copied back. Each step shape is captured once into a CUDA graph and replayed.
//
// A Step sends every kernel launch of the package to the decoder's own stream (t2_use_stream) for
// its duration, so a Backend and a Decoder in one process must not run at the same time (one after
// the other is fine: the stream is reset when Step returns). Device 0 only.
type Decoder struct {
	cfg   gpu.Config
	kv    gpu.KVCacheSpec
	dev   int
	sms   int
	ctx   dptr
	pl    paramLayout
	param dptr // bf16 weights, pl's layout
	// attImpl runs the attention among a step's own tokens (prefill chunks): the kernels
	// Options.Attention "auto" picks (resolveAttention), the wgmma ones on H100/H200.
	attImpl C.int
	kc, vc  dptr // K and V caches, [layers][slots][kvdim] bf16
	ws      decodeWS
	closed  bool

	// stream carries every launch of a step, so that it can be captured into a CUDA graph; graphs
	// holds one executable graph per step shape (tokens, attention items, sampled rows), replayed
	// with the step's index arrays uploaded beforehand (at batch 1 a step is ~400 launches whose
	// CPU-side cost would otherwise exceed the GPU time). Dropped whenever the workspace moves.
	stream   dptr
	graphs   map[graphKey]dptr
	noGraphs bool      // launch directly (benchmarks compare)
	prof     *profiler // per-operation device times of eager steps (benchmarks)
	// seen counts the eager launches of each step shape not yet captured: a shape is captured
	// into a graph only once it has come back captureAfter times. Under a serving load (ragged
	// contexts growing every step, prefill chunks of every size) most shapes never repeat, and
	// capturing and instantiating a ~400-node graph for a step that runs once costs far more
	// than launching it (issue 28); steady shapes (a fixed decode batch) still get their graph.
	seen         map[graphKey]int
	captureAfter int
	st           decoderStats
	// noMMA plans every paged partial on the CUDA-core kernel (no tensor-core prefill, no cascade):
	// the behaviour before issue 28, for A/B benchmarks and cross-checks.
	noMMA bool
	// ownMMA (the default) also reads a decode token's own (unshared) blocks with the tensor-core
	// kernel (an item of g rows) instead of the CUDA-core one: 4,378 → 5,758 output tok/s on the
	// τ² load (1.7B, H200, same run), its cp.async double buffering keeping more bytes in flight.
	ownMMA bool
	// itemsPerSM sets the paged kernels' split: every key range is cut so the step has about
	// this many items per SM (flash-decoding); fewer, longer items merge fewer partials, more
	// keep more bytes in flight. defaultItemsPerSM unless a benchmark sets it.
	itemsPerSM int
	// ipc maps the trainer's weight buffer while its handle stays the same (LoadWeightsIPC).
	ipc ipcMapping
	// stage is the device staging buffer of weight-sync updates (weightsync.go), kept between
	// updates.
	stage deviceStage
	// planner lays out every step on the host (plan.go), reusing its buffers.
	planner planner
}

// defaultItemsPerSM is the paged kernels' split target (Decoder.itemsPerSM).
const defaultItemsPerSM = 4

// decoderStats count where a Decoder's steps went (benchmarks and profiles).
type decoderStats struct {
	Steps, Captures, Replays, Eager int
	CascadeGroups                   int // shared ranges read once for a group of decode tokens
	CaptureSec, StepSec, PlanSec    float64
}

// defaultCaptureAfter: capture a step shape's graph on its second eager run.
const defaultCaptureAfter = 1

type graphKey struct {
	n, items, mitems, mrows, rows, maxRows int
	pure                                   bool
}

// maxGraphs bounds the graph cache; when full it is emptied (shapes repeat in steady decoding).
const maxGraphs = 64

func (d *Decoder) dropGraphs() error {
	var errs []error
	for k, g := range d.graphs {
		errs = append(errs, statusErr(C.t2_graph_destroy(g)))
		delete(d.graphs, k)
	}
	return errors.Join(errs...)
}

var _ gpu.Decoder = (*Decoder)(nil)

// DecodeMaxStepTokens is the step size KVBlocksForMemory reserves activation workspace for. A
// larger step still runs (the workspace grows) if the memory is there.
const DecodeMaxStepTokens = 16384

// decodeLogitRows bounds the sampled rows whose logits exist at once (78 MB for Qwen3's vocabulary).
const decodeLogitRows = 256

// group is a set of device buffers allocated and freed together.
type group struct {
	ptrs  []dptr
	bytes int64
	err   error
}

func (g *group) get(bytes int) dptr {
	if g.err != nil {
		return nil
	}
	p, err := malloc(max(bytes, 16))
	if err != nil {
		g.err = err
		return nil
	}
	g.ptrs = append(g.ptrs, p)
	g.bytes += int64(max(bytes, 16))
	return p
}

func (g *group) free() error {
	var errs []error
	for _, p := range g.ptrs {
		if err := free(p); err != nil {
			errs = append(errs, err)
		}
	}
	*g = group{}
	return errors.Join(errs...)
}

// decodeWS is the step workspace: per-token activations (one layer's worth, reused by every layer),
// the step's index arrays, the paged-attention work items and partials, and the sampler's buffers.
type decodeWS struct {
	tokCap, itemCap, tblCap, rowCap int
	tok, item, tbl, row             group

	x0, xn, qkv, qr, kr, att, a, x2, gu, h   dptr // bf16 [tokCap, ·]
	rstd, rstdq, rstdk, lse                  dptr // fp32
	tokens, positions, send, blockmax, slots dptr // int32
	tokInfo                                  dptr // int32 [tokCap, 3]
	items, partO, partLse                    dptr // int32 [itemCap, 8]; fp32 [itemCap·ROWS, d]; fp32 [itemCap·ROWS]
	tables                                   dptr // int32 [tblCap]
	rowIdx, fparams, topk, unif, out, logits dptr // [rowCap] rows; logits bf16 [min(rowCap, decodeLogitRows), V]
}

func (w *decodeWS) free() error {
	return errors.Join(w.tok.free(), w.item.free(), w.tbl.free(), w.row.free())
}

func grow(n int) int { return max(64, 1<<bitsLen(n-1)) }

func bitsLen(x int) int {
	n := 0
	for x > 0 {
		x >>= 1
		n++
	}
	return n
}

// wsTokenBytes is the workspace one token of a step needs (the tok group below).
func wsTokenBytes(c gpu.Config) int64 {
	H, I, QD, KVD, nh, nkv := c.HiddenSize, c.IntermediateSize, c.QDim(), c.KVDim(), c.NumAttentionHeads, c.NumKeyValueHeads
	bf := 2 * (5*H + (QD + 2*KVD) + 2*QD + KVD + 3*I)
	f := 4 * (1 + nh + nkv + nh)
	return int64(bf + f + 4*(5+3) + 8)
}

// ensure sizes the workspace for a step of n tokens, items work items, tbl block-table entries and
// rows sampled rows.
func (d *Decoder) ensure(n, items, tbl, rows int) error {
	c := d.cfg
	w := &d.ws
	if n > w.tokCap || items > w.itemCap || tbl > w.tblCap || rows > w.rowCap {
		if err := d.dropGraphs(); err != nil {
			return fmt.Errorf("cuda: decoder: drop graphs: %w", err)
		}
	}
	if n > w.tokCap {
		if err := w.tok.free(); err != nil {
			return err
		}
		w.tokCap = 0
		capN := grow(n)
		g := &w.tok
		bf := func(cols int) dptr { return g.get(2 * capN * cols) }
		f32 := func(cols int) dptr { return g.get(4 * capN * cols) }
		H, I, QD, KVD := c.HiddenSize, c.IntermediateSize, c.QDim(), c.KVDim()
		w.x0, w.xn, w.qkv, w.qr, w.kr = bf(H), bf(H), bf(QD+2*KVD), bf(QD), bf(KVD)
		w.att, w.a, w.x2, w.gu, w.h = bf(QD), bf(H), bf(H), bf(2*I), bf(I)
		w.rstd, w.rstdq, w.rstdk, w.lse = f32(1), f32(c.NumAttentionHeads), f32(c.NumKeyValueHeads), f32(c.NumAttentionHeads)
		w.tokens, w.positions, w.send, w.slots, w.tokInfo = f32(1), f32(1), f32(1), f32(1), f32(3)
		w.blockmax = g.get(blockmaxBytes(capN))
		if g.err != nil {
			err := g.err
			_ = g.free()
			return fmt.Errorf("cuda: decoder workspace for %d tokens: %w", n, err)
		}
		w.tokCap = capN
	}
	if items > w.itemCap {
		if err := w.item.free(); err != nil {
			return err
		}
		w.itemCap = 0
		capI := grow(items)
		g := &w.item
		w.items = g.get(4 * 8 * capI)
		w.partO = g.get(4 * capI * C.T2_PAGED_ROWS * c.HeadDim)
		w.partLse = g.get(4 * capI * C.T2_PAGED_ROWS)
		if g.err != nil {
			err := g.err
			_ = g.free()
			return fmt.Errorf("cuda: decoder workspace for %d attention items: %w", items, err)
		}
		w.itemCap = capI
	}
	if tbl > w.tblCap {
		if err := w.tbl.free(); err != nil {
			return err
		}
		w.tblCap = 0
		capT := grow(tbl)
		w.tables = w.tbl.get(4 * capT)
		if w.tbl.err != nil {
			err := w.tbl.err
			_ = w.tbl.free()
			return fmt.Errorf("cuda: decoder block tables: %w", err)
		}
		w.tblCap = capT
	}
	if rows > w.rowCap {
		if err := w.row.free(); err != nil {
			return err
		}
		w.rowCap = 0
		capR := grow(rows)
		g := &w.row
		w.rowIdx, w.fparams, w.topk, w.unif, w.out = g.get(4*capR), g.get(12*capR), g.get(4*capR), g.get(8*capR), g.get(8*capR)
		w.logits = g.get(2 * min(capR, decodeLogitRows) * c.VocabSize)
		if g.err != nil {
			err := g.err
			_ = g.free()
			return fmt.Errorf("cuda: decoder sampling workspace for %d rows: %w", rows, err)
		}
		w.rowCap = capR
	}
	return nil
}

// checkDecoderConfig adds the serving kernels' limits to checkConfig's.
func checkDecoderConfig(c gpu.Config) error {
	if err := checkConfig(c); err != nil {
		return err
	}
	if g := c.NumAttentionHeads / c.NumKeyValueHeads; g > C.T2_PAGED_ROWS {
		return fmt.Errorf("cuda: %d query heads per KV head: the paged attention kernel supports up to %d", g, C.T2_PAGED_ROWS)
	}
	return nil
}

// NewDecoder uploads w's weights as bf16 to device 0 and allocates a paged KV cache of kv's
// geometry.
func NewDecoder(w *gpu.Weights, kv gpu.KVCacheSpec) (*Decoder, error) {
	if err := kv.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: decoder: %w", err)
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("cuda: decoder: %w", err)
	}
	if err := checkDecoderConfig(w.Config); err != nil {
		return nil, err
	}
	info, err := Device(0)
	if err != nil {
		return nil, err
	}
	d := &Decoder{cfg: w.Config, kv: kv, sms: info.SMs, graphs: map[graphKey]dptr{},
		seen: map[graphKey]int{}, captureAfter: defaultCaptureAfter, ownMMA: true, itemsPerSM: defaultItemsPerSM}
	d.pl = newParamLayout(d.cfg, gpu.ParamSpecs(d.cfg))
	// t2_init selects the device on this thread; the allocations and uploads below must follow on
	// the same thread (Backend.enter says why).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ctx dptr
	if err := statusErr(C.t2_init(C.int(d.dev), &ctx)); err != nil {
		return nil, fmt.Errorf("cuda: decoder: init device %d: %w", d.dev, err)
	}
	d.ctx = ctx
	impl, err := resolveAttention(AttentionAuto, d.dev) // the trainer's choice of forward kernels
	if err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("cuda: decoder: %w", err)
	}
	d.attImpl = attImplOf(impl)
	var st dptr
	if err := statusErr(C.t2_stream_create(&st)); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("cuda: decoder: stream: %w", err)
	}
	d.stream = st
	host, err := d.hostWeights(w)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	if d.param, err = malloc(2 * d.pl.total); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("cuda: decoder weights: %w", err)
	}
	if err := d.uploadWeights(host); err != nil {
		_ = d.Close()
		return nil, err
	}
	cache := int(d.cacheBytes())
	if d.kc, err = malloc(cache); err == nil {
		d.vc, err = malloc(cache)
	}
	if err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("cuda: decoder KV cache (%d blocks of %d): %w", kv.NumBlocks, kv.BlockSize, err)
	}
	return d, nil
}

// cacheBytes is one of the K and V caches' size.
func (d *Decoder) cacheBytes() int64 {
	return int64(d.cfg.NumHiddenLayers) * int64(d.kv.Tokens()) * int64(d.cfg.KVDim()) * 2
}

// hostWeights validates w against the decoder's geometry and converts it to the flat bf16 layout
// (round to nearest even, as the trainer's t2_f32_to_bf16), over all cores.
func (d *Decoder) hostWeights(w *gpu.Weights) ([]uint16, error) {
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("cuda: decoder weights: %w", err)
	}
	if !reflect.DeepEqual(w.Config, d.cfg) {
		return nil, fmt.Errorf("cuda: decoder weights: config differs from the decoder's")
	}
	host := make([]uint16, d.pl.total)
	for _, s := range gpu.ParamSpecs(d.cfg) {
		// Each tensor over all cores: with one tensor per core, the embedding (a fifth of
		// Qwen3-1.7B) kept one core busy long after the others were done.
		safetensors.BF16FromFloat32s(host[d.pl.offs[s.Name]:][:s.Size()], w.Tensors[s.Name])
	}
	return host, nil
}

func (d *Decoder) uploadWeights(host []uint16) error {
	if err := statusErr(C.t2_h2d(d.param, unsafe.Pointer(&host[0]), C.size_t(2*len(host)))); err != nil {
		return fmt.Errorf("cuda: decoder: upload weights: %w", err)
	}
	return nil
}

// KVBlocksForMemory is how many KV-cache blocks of blockSize tokens fit in fraction of device 0's
// free memory once a Decoder of cfg holds its bf16 weights, the cuBLAS workspace and the step
// workspace for DecodeMaxStepTokens tokens. Call it before NewDecoder (it reads the free memory now).
func KVBlocksForMemory(cfg gpu.Config, blockSize int, fraction float64) (int, error) {
	if err := checkDecoderConfig(cfg); err != nil {
		return 0, err
	}
	if err := (gpu.KVCacheSpec{BlockSize: blockSize, NumBlocks: 1}).Validate(); err != nil {
		return 0, fmt.Errorf("cuda: %w", err)
	}
	if !(fraction > 0 && fraction <= 1) {
		return 0, fmt.Errorf("cuda: KV memory fraction %v must be in (0, 1]", fraction)
	}
	info, err := Device(0)
	if err != nil {
		return 0, err
	}
	pl := newParamLayout(cfg, gpu.ParamSpecs(cfg))
	fixed := 2*int64(pl.total) + 32<<20 + // weights, cuBLAS workspace
		DecodeMaxStepTokens*wsTokenBytes(cfg) + // step activations
		int64(2*decodeLogitRows*cfg.VocabSize) + 256<<20 // logits; partials, tables and the CUDA context's slack
	avail := int64(fraction*float64(info.FreeBytes)) - fixed
	per := int64(blockSize) * cfg.KVBytesPerToken(2)
	if avail < per {
		return 0, fmt.Errorf("cuda: %.0f%% of %.1f GB free leaves no room for a KV block after %.1f GB of weights and workspace",
			100*fraction, float64(info.FreeBytes)/1e9, float64(fixed)/1e9)
	}
	return int(avail / per), nil
}

// Config returns the model configuration.
func (d *Decoder) Config() gpu.Config { return d.cfg }

// KVSpec returns the cache geometry.
func (d *Decoder) KVSpec() gpu.KVCacheSpec { return d.kv }

// LoadWeights replaces the weights: w is validated and converted on the host first, so a bad w
// leaves the old weights serving; then one copy overwrites the device buffer (no second device copy
// of the weights is needed, so a cache sized by KVBlocksForMemory still fits).
func (d *Decoder) LoadWeights(w *gpu.Weights) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	host, err := d.hostWeights(w)
	if err != nil {
		return err
	}
	if err := syncDevice(); err != nil {
		return fmt.Errorf("cuda: decoder: load weights: %w", err)
	}
	return d.uploadWeights(host)
}

// enter pins the goroutine to its OS thread and selects the decoder's device there for the whole
// operation (Backend.enter says why); pair it with a deferred leave.
func (d *Decoder) enter() error {
	runtime.LockOSThread()
	if d.closed {
		runtime.UnlockOSThread()
		return errors.New("cuda: decoder is closed")
	}
	if err := statusErr(C.t2_set_device(C.int(d.dev))); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cuda: select device %d: %w", d.dev, err)
	}
	return nil
}

// leave ends what enter began.
func (d *Decoder) leave() { runtime.UnlockOSThread() }

// Close frees the weights, the cache, the workspace and the context.
func (d *Decoder) Close() error {
	if d.closed {
		return nil
	}
	if err := d.enter(); err == nil {
		defer d.leave()
	}
	d.closed = true
	errs := []error{d.dropGraphs(), d.ws.free(), statusErr(C.t2_stream_destroy(d.stream)), d.ipc.close(), d.stage.free()}
	for _, p := range []dptr{d.param, d.kc, d.vc} {
		if p != nil {
			errs = append(errs, free(p))
		}
	}
	if d.ctx != nil {
		errs = append(errs, statusErr(C.t2_destroy(d.ctx)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda: decoder close: %w", err)
	}
	return nil
}

// The step's plan comes from the pure-Go planner (plan.go); T2_PAGED_ROWS is its pagedRows.
const (
	_ = uint(pagedRows - C.T2_PAGED_ROWS) // compile-time: pagedRows ≥ T2_PAGED_ROWS …
	_ = uint(C.T2_PAGED_ROWS - pagedRows) // … and ≤
)

// plan lays the step out with the decoder's planner (planner.plan), under the decoder's current
// kernel choices; the plan is reused by the next call.
func (d *Decoder) plan(seqs []gpu.ServeSeq) *stepPlan {
	d.planner.planKnobs = knobsFor(d.cfg, d.kv, d.sms, d.itemsPerSM, d.noMMA, d.ownMMA)
	return d.planner.plan(seqs)
}

func h2d[T any](dst dptr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	var z T
	return statusErr(C.t2_h2d(dst, unsafe.Pointer(&src[0]), C.size_t(len(src)*int(unsafe.Sizeof(z)))))
}

// Step runs one batch (see gpu.Decoder).
func (d *Decoder) Step(seqs []gpu.ServeSeq) ([]gpu.Sampled, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	if err := gpu.ValidateServeStep(d.cfg, d.kv, seqs); err != nil {
		return nil, err
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	t0 := nowSec()
	defer func() { d.st.Steps++; d.st.StepSec += nowSec() - t0 }()
	p := d.plan(seqs)
	d.st.PlanSec += nowSec() - t0
	d.st.CascadeGroups += p.groups
	nitems, nm, rows := len(p.items)/8, len(p.mitems)/8, len(p.rowIdx)
	ints := p.itemInts()
	if err := d.ensure(p.n, max(p.nslots, (len(ints)+7)/8), len(p.tables), rows); err != nil {
		return nil, err
	}
	w := &d.ws
	for _, u := range []struct {
		dst dptr
		src []int32
	}{{w.tokens, p.tokens}, {w.positions, p.positions}, {w.slots, p.slots}, {w.send, p.send},
		{w.tokInfo, p.tokInfo}, {w.items, ints}, {w.tables, p.tables}, {w.rowIdx, p.rowIdx}, {w.topk, p.topk}} {
		if err := h2d(u.dst, u.src); err != nil {
			return nil, fmt.Errorf("cuda: decoder: upload step: %w", err)
		}
	}
	if err := h2d(w.fparams, p.fparams); err != nil {
		return nil, fmt.Errorf("cuda: decoder: upload step: %w", err)
	}
	if err := h2d(w.unif, p.unif); err != nil {
		return nil, fmt.Errorf("cuda: decoder: upload step: %w", err)
	}
	if err := statusErr(C.t2_use_stream(d.ctx, d.stream)); err != nil {
		return nil, fmt.Errorf("cuda: decoder: select stream: %w", err)
	}
	defer C.t2_use_stream(nil, nil) // back to the legacy stream for anything else in the process
	launch := func(s *seq) {
		d.forward(s, p.n, nitems, nm, len(p.items), len(p.items)+len(p.mitems), p.maxRows, p.pure)
		if rows > 0 {
			d.sample(s, rows)
		}
	}
	key := graphKey{p.n, nitems, nm, len(p.mrows), rows, p.maxRows, p.pure}
	_, captured := d.graphs[key]
	eager := d.noGraphs || d.prof != nil
	if !eager && !captured && d.seen[key] < d.captureAfter {
		if len(d.seen) >= 4096 {
			clear(d.seen)
		}
		d.seen[key]++
		eager = true
	}
	if eager {
		d.st.Eager++
		s := &seq{prof: d.prof}
		launch(s)
		if s.err != nil {
			if d.prof != nil {
				d.prof.pending, d.prof.used = d.prof.pending[:0], 0
			}
			return nil, s.err
		}
		if d.prof != nil {
			if err := s.finish("decoder step"); err != nil {
				return nil, err
			}
		}
	} else if err := d.replay(key, launch); err != nil {
		return nil, err
	}
	if rows == 0 {
		if err := syncDevice(); err != nil {
			return nil, fmt.Errorf("cuda: decoder step: %w", err)
		}
		return nil, nil
	}
	raw := make([]int32, 2*rows)
	if err := statusErr(C.t2_d2h(unsafe.Pointer(&raw[0]), w.out, C.size_t(4*len(raw)))); err != nil {
		return nil, fmt.Errorf("cuda: decoder step: %w", err)
	}
	out := make([]gpu.Sampled, rows)
	for i := range out {
		out[i] = gpu.Sampled{Token: raw[2*i], LogProb: math.Float32frombits(uint32(raw[2*i+1]))}
	}
	return out, nil
}

// setProfiling turns the per-operation profiler on (steps then launch without graphs, each launch
// between CUDA events) or off; on clears earlier totals.
func (d *Decoder) setProfiling(on bool) error {
	if d.prof != nil {
		if err := d.prof.close(); err != nil {
			return err
		}
		d.prof = nil
	}
	if on {
		d.prof = &profiler{totals: map[string]*OpTime{}}
	}
	return nil
}

// replay launches the graph of the step's shape, capturing it from launch first if it is new.
func (d *Decoder) replay(key graphKey, launch func(*seq)) error {
	exec, ok := d.graphs[key]
	d.st.Replays++
	if !ok {
		t0 := nowSec()
		defer func() { d.st.Captures++; d.st.CaptureSec += nowSec() - t0 }()
		delete(d.seen, key)
		if len(d.graphs) >= maxGraphs {
			if err := d.dropGraphs(); err != nil {
				return fmt.Errorf("cuda: decoder: drop graphs: %w", err)
			}
		}
		if err := statusErr(C.t2_graph_begin(d.stream)); err != nil {
			return fmt.Errorf("cuda: decoder: begin graph capture: %w", err)
		}
		s := &seq{}
		launch(s)
		if s.err != nil {
			C.t2_graph_abort(d.stream)
			return s.err
		}
		if err := statusErr(C.t2_graph_end(d.stream, &exec)); err != nil {
			return fmt.Errorf("cuda: decoder: capture step graph: %w", err)
		}
		d.graphs[key] = exec
	}
	if err := statusErr(C.t2_graph_launch(exec, d.stream)); err != nil {
		return fmt.Errorf("cuda: decoder: launch step graph: %w", err)
	}
	return nil
}

// forward runs the embedding and every layer over the step's n tokens, leaving the last layer's
// output (before the final norm) in ws.x0. The residual add that closes layer l is fused into layer
// l+1's input RMSNorm (t2_rmsnorm_fwd with a delta: the same bf16 sum, one kernel fewer a layer).
// pure: decode tokens with context only, attention entirely from the paged kernel (no FA2).
//
// nitems CUDA-core items start ws.items; nm tensor-core items start at int offset moff, their rows
// at roff (stepPlan.itemInts).
func (d *Decoder) forward(s *seq, n, nitems, nm, moff, roff, maxRows int, pure bool) {
	c, w := d.cfg, &d.ws
	H, I, nh, nkv, hd := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	QD, KVD := c.QDim(), c.KVDim()
	QKV := QD + 2*KVD
	eps, theta := C.float(c.RMSNormEps), C.float(c.RopeTheta)
	pw := func(o int) dptr { return off(d.param, o, 2) }
	slots := d.kv.Tokens()
	if !pure {
		s.do("tree block maxima", func() C.t2_status { return C.t2_tree_blockmax(i32p(w.blockmax), i32p(w.send), ci(n)) })
	}
	s.do("embedding", func() C.t2_status { return C.t2_embedding_fwd(w.x0, i32p(w.tokens), pw(d.pl.embed), ci(n), ci(H)) })
	hasBase := C.int(1)
	if pure {
		hasBase = 0
	}
	for l := range c.NumHiddenLayers {
		lo := d.pl.layers[l]
		xin := w.x0 // this layer's input (residual stream)
		kc := off(d.kc, l*slots*KVD, 2)
		vc := off(d.vc, l*slots*KVD, 2)
		at := func(op string) string { return fmt.Sprintf("layer %d %s", l, op) }
		if l == 0 {
			s.do(at("input_layernorm"), func() C.t2_status {
				return C.t2_rmsnorm_fwd(w.xn, nil, f32p(w.rstd), xin, nil, pw(lo.ln1), ci(n), ci(H), eps)
			})
		} else { // xin = x2 + a of the previous layer, then its norm
			s.do(at("residual + input_layernorm"), func() C.t2_status {
				return C.t2_rmsnorm_fwd(w.xn, xin, f32p(w.rstd), w.x2, w.a, pw(lo.ln1), ci(n), ci(H), eps)
			})
		}
		s.do(at("qkv_proj"), func() C.t2_status {
			return C.t2_linear_fwd(d.ctx, w.qkv, w.xn, pw(lo.qkv), ci(n), ci(H), ci(QKV))
		})
		s.do(at("q/k norm + rope"), func() C.t2_status {
			return C.t2_qknorm_rope_fwd(w.qr, w.kr, f32p(w.rstdq), f32p(w.rstdk), w.qkv, pw(lo.qn), pw(lo.kn),
				i32p(w.positions), ci(n), ci(nh), ci(nkv), ci(hd), eps, theta)
		})
		vnew := off(w.qkv, QD+KVD, 2)
		s.do(at("kv write"), func() C.t2_status {
			return C.t2_kv_write(kc, vc, w.kr, vnew, ci(KVD), ci(QKV), i32p(w.slots), ci(n), ci(KVD))
		})
		if !pure {
			s.do(at("attention (step tokens)"), func() C.t2_status {
				return C.t2_attention_fwd(w.att, f32p(w.lse), w.qr, w.kr, vnew, ci(QD), ci(KVD), ci(QKV),
					i32p(w.send), i32p(w.blockmax), ci(n), ci(nh), ci(nkv), ci(hd), d.attImpl)
			})
		}
		if nitems > 0 {
			s.do(at("paged attention"), func() C.t2_status {
				return C.t2_paged_attention(f32p(w.partO), f32p(w.partLse), w.qr, ci(QD), kc, vc, i32p(w.tables),
					i32p(w.items), ci(nitems), ci(d.kv.BlockSize), ci(nh), ci(nkv), ci(hd), ci(maxRows))
			})
		}
		if nm > 0 {
			s.do(at("paged attention (tensor cores)"), func() C.t2_status {
				return C.t2_paged_attention_mma(f32p(w.partO), f32p(w.partLse), w.qr, ci(QD), kc, vc, i32p(w.tables),
					i32p(off(w.items, moff, 4)), i32p(off(w.items, roff, 4)), ci(nm), ci(d.kv.BlockSize), ci(nkv), ci(hd))
			})
		}
		if nitems+nm > 0 {
			s.do(at("attention merge"), func() C.t2_status {
				return C.t2_paged_merge(w.att, f32p(w.lse), f32p(w.partO), f32p(w.partLse), i32p(w.tokInfo),
					ci(n), ci(nh), ci(nkv), ci(hd), hasBase)
			})
		}
		s.do(at("o_proj"), func() C.t2_status {
			return C.t2_linear_fwd(d.ctx, w.a, w.att, pw(lo.o), ci(n), ci(QD), ci(H))
		})
		s.do(at("post_attention_layernorm"), func() C.t2_status {
			return C.t2_rmsnorm_fwd(w.xn, w.x2, f32p(w.rstd), xin, w.a, pw(lo.ln2), ci(n), ci(H), eps)
		})
		s.do(at("gate_up_proj"), func() C.t2_status {
			return C.t2_linear_fwd(d.ctx, w.gu, w.xn, pw(lo.gu), ci(n), ci(H), ci(2*I))
		})
		s.do(at("swiglu"), func() C.t2_status { return C.t2_swiglu_fwd(w.h, w.gu, ci(n), ci(I)) })
		s.do(at("down_proj"), func() C.t2_status {
			return C.t2_linear_fwd(d.ctx, w.a, w.h, pw(lo.down), ci(n), ci(I), ci(H))
		})
	}
	s.do("residual", func() C.t2_status { return C.t2_add_bf16(w.x0, w.x2, w.a, csz(n*H)) })
}

// sample gathers the sampled rows' hidden states, applies the final norm and the LM head to them
// only, and runs the sampler, chunk by chunk, into ws.out.
func (d *Decoder) sample(s *seq, rows int) {
	c, w := d.cfg, &d.ws
	H, V := c.HiddenSize, c.VocabSize
	pw := func(o int) dptr { return off(d.param, o, 2) }
	s.do("gather sampled rows", func() C.t2_status {
		return C.t2_gather_rows(w.a, w.x0, i32p(w.rowIdx), ci(rows), ci(H))
	})
	s.do("final norm", func() C.t2_status {
		return C.t2_rmsnorm_fwd(w.xn, nil, f32p(w.rstd), w.a, nil, pw(d.pl.norm), ci(rows), ci(H), C.float(c.RMSNormEps))
	})
	for r0 := 0; r0 < rows; r0 += decodeLogitRows {
		nr := min(decodeLogitRows, rows-r0)
		s.do("lm_head", func() C.t2_status {
			return C.t2_linear_fwd(d.ctx, w.logits, off(w.xn, r0*H, 2), pw(d.pl.lmHead), ci(nr), ci(H), ci(V))
		})
		s.do("sample", func() C.t2_status {
			return C.t2_sample((*C.int32_t)(off(w.out, 2*r0, 4)), w.logits, f32p(off(w.fparams, 3*r0, 4)),
				i32p(off(w.topk, r0, 4)), (*C.double)(off(w.unif, r0, 8)), ci(nr), ci(V))
		})
	}
}
