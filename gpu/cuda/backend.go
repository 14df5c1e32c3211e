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
	"runtime"
	"unsafe"

	"tau2rl/gpu"
)

// Backend is the CUDA gpu.Backend. It owns one device context (cuBLAS handle and workspace), the
// flat parameter buffers (fp32 master, bf16 copy, fp32 gradient, AdamW m and v, all with the same
// element offsets), and the activations of the last Forward. It is not safe for concurrent use;
// each public method re-selects its device, so the goroutine driving it may move between threads.
type Backend struct {
	cfg gpu.Config
	opt Options
	ctx dptr

	specs  []gpu.ParamSpec
	offs   map[string]int // element offset of each tensor in the flat buffers
	total  int            // elements in each flat buffer (tensors plus alignment padding)
	master dptr           // fp32
	param  dptr           // bf16 copy used by the kernels
	grad   dptr           // fp32, accumulates until Step
	m, v   dptr           // fp32 AdamW moments
	// gradsStale: grad still holds what the last Step consumed and counts as zero. Step leaves it
	// instead of writing 4 more bytes per parameter (6.9 GB at 1.7B, an eighth of AdamW's traffic);
	// the next backward pass overwrites every tensor on its first write — the weight-gradient
	// GEMMs with beta = 0, the norm weights (kernels accumulate into them) through one
	// t2_zero_spans launch over normSpans, an embedding that is not the LM head's (scatter-added)
	// and an LM head that does not run (no scored node) with memsets — and any other reader of
	// grad zeroes it first (clearStaleGrads).
	gradsStale bool
	normSpans  dptr // int64 (offset, length) pairs, nNormSpans of them: the norms' gradient tensors
	nNormSpans int

	embed, norm, lmHead int // offsets (lmHead == embed when tied)
	layers              []layerOffsets
	step                int
	partial             dptr // T2_NORM_BLOCKS floats for the gradient norm

	act         activations
	n           int  // nodes in the last Forward/LogProbs
	headRows    int  // of those, nodes the LM head runs on (see headPlan)
	haveForward bool // Backward may run
	// logitsKept: Forward's head fitted one logit chunk, so a.logits still holds its bf16 logits
	// and Backward skips recomputing them (the LM head GEMM, a quarter of the head's work).
	logitsKept bool
	held       int64
	closed     bool
	prof       *profiler // nil unless SetProfiling(true)
	// stateErr is set when LoadOptimizerState failed half-way through replacing the state; Step
	// and SaveOptimizerState refuse to run on such a state until a load succeeds.
	stateErr error
	// shard is set once the backend is a data-parallel rank (shard.go): master, m and v then hold
	// only the shard's elements, and param/grad are padded to World·Len.
	shard *gpu.Shard
	// ipc is the CUDA IPC export of param, made by the first ExportWeights (ipc.go).
	ipc *gpu.IPCExport
}

// layerOffsets are the element offsets of one layer's tensors; qkv points at q_proj, which k_proj
// and v_proj follow contiguously (one [q+2kv, H] weight), gu at gate_proj followed by up_proj.
type layerOffsets struct {
	ln1, qkv, qn, kn, o, ln2, gu, down int
}

var (
	_ gpu.Backend        = (*Backend)(nil)
	_ gpu.WeightExporter = (*Backend)(nil)
)

var errClosed = errors.New("cuda: backend is closed")

// contiguous names the tensors that must directly follow the previous one in the flat layout so
// fused GEMMs can treat them as one weight.
var contiguous = map[string]bool{
	"self_attn.k_proj.weight": true, "self_attn.v_proj.weight": true, "mlp.up_proj.weight": true,
}

// checkConfig rejects shapes the kernels do not implement (on top of gpu.Config.Validate).
func checkConfig(c gpu.Config) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if c.HeadDim != 64 && c.HeadDim != 128 {
		return fmt.Errorf("cuda: head_dim %d: the attention kernels support 64 and 128", c.HeadDim)
	}
	if c.HiddenSize%8 != 0 || c.IntermediateSize%8 != 0 {
		return fmt.Errorf("cuda: hidden_size %d and intermediate_size %d must be multiples of 8", c.HiddenSize, c.IntermediateSize)
	}
	if c.HiddenSize > 12288 {
		return fmt.Errorf("cuda: hidden_size %d above the 12288 the RMSNorm backward supports", c.HiddenSize)
	}
	return nil
}

// New uploads w to the device selected by opt and returns a backend ready to train.
func New(w *gpu.Weights, opt Options) (*Backend, error) {
	b, err := describe(w, opt)
	if err != nil {
		return nil, err
	}
	// t2_init selects the device on this thread; every allocation and copy below must follow
	// on the same thread (see enter).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.open(); err != nil {
		return nil, err
	}
	if err := b.layout(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.upload(w); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// open initializes b's device (Options.Device) on the calling thread, which the caller has
// locked, and resolves Options.Attention to the kernels that device runs; on an error b is closed.
// New and NewShard start with it.
func (b *Backend) open() error {
	var ctx dptr
	if err := statusErr(C.t2_init(C.int(b.opt.Device), &ctx)); err != nil {
		return fmt.Errorf("cuda: init device %d: %w", b.opt.Device, err)
	}
	b.ctx = ctx
	impl, err := resolveAttention(b.opt.Attention, b.opt.Device)
	if err != nil {
		b.Close()
		return err
	}
	b.opt.Attention = impl
	if b.opt.GEMM == GEMMTuned {
		if err := statusErr(C.t2_set_gemm(ctx, C.T2_GEMM_TUNED)); err != nil {
			b.Close()
			return fmt.Errorf("cuda: gemm %s: %w", GEMMTuned, err)
		}
	}
	return nil
}

// describe checks the weights and options New and NewShard take and returns the backend's
// host-side description, nothing on the device yet.
func describe(w *gpu.Weights, opt Options) (*Backend, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if err := checkConfig(w.Config); err != nil {
		return nil, err
	}
	return &Backend{cfg: w.Config, opt: opt, specs: gpu.ParamSpecs(w.Config), offs: map[string]int{}}, nil
}

// Load builds a backend from a Hugging Face checkpoint directory (config.json + safetensors).
func Load(dir string, opt Options) (*Backend, error) {
	w, err := gpu.LoadWeights(dir)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return New(w, opt)
}

// NewRandom builds a backend with gpu.NewRandomWeights(cfg, seed), the initialization gpu/cpu uses
// for the same seed.
func NewRandom(cfg gpu.Config, seed uint64, opt Options) (*Backend, error) {
	w, err := gpu.NewRandomWeights(cfg, seed)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return New(w, opt)
}

func alignUp(x, a int) int { return (x + a - 1) / a * a }

// paramLayout is the flat parameter layout shared by the trainer (Backend) and the serving
// Decoder: offsets in gpu.ParamSpecs order, 64-element aligned, except tensors fused with their
// predecessor (q/k/v, gate/up), which follow it contiguously.
type paramLayout struct {
	offs                map[string]int
	total               int
	embed, norm, lmHead int // lmHead == embed when tied
	layers              []layerOffsets
}

func newParamLayout(cfg gpu.Config, specs []gpu.ParamSpec) paramLayout {
	pl := paramLayout{offs: map[string]int{}}
	o := 0
	for _, s := range specs {
		suffix := s.Name
		if i := lastDot2(s.Name); i >= 0 {
			suffix = s.Name[i:]
		}
		if !contiguous[suffix] {
			o = alignUp(o, 64)
		}
		pl.offs[s.Name] = o
		o += s.Size()
	}
	pl.total = alignUp(o, 64)
	pl.embed, pl.norm = pl.offs[gpu.NameEmbed], pl.offs[gpu.NameNorm]
	pl.lmHead = pl.embed
	if !cfg.TieWordEmbeddings {
		pl.lmHead = pl.offs[gpu.NameLMHead]
	}
	for l := range cfg.NumHiddenLayers {
		at := func(s string) int { return pl.offs[gpu.LayerName(l, s)] }
		pl.layers = append(pl.layers, layerOffsets{
			ln1: at("input_layernorm.weight"), qkv: at("self_attn.q_proj.weight"),
			qn: at("self_attn.q_norm.weight"), kn: at("self_attn.k_norm.weight"), o: at("self_attn.o_proj.weight"),
			ln2: at("post_attention_layernorm.weight"), gu: at("mlp.gate_proj.weight"), down: at("mlp.down_proj.weight"),
		})
	}
	return pl
}

// layout assigns offsets (newParamLayout) and allocates the five flat buffers.
func (b *Backend) layout() error {
	pl := newParamLayout(b.cfg, b.specs)
	b.offs, b.total, b.embed, b.norm, b.lmHead, b.layers = pl.offs, pl.total, pl.embed, pl.norm, pl.lmHead, pl.layers
	var err error
	for _, p := range []struct {
		dst  *dptr
		elem int
	}{{&b.master, 4}, {&b.param, 2}, {&b.grad, 4}, {&b.m, 4}, {&b.v, 4}} {
		if *p.dst, err = b.alloc(b.total * p.elem); err != nil {
			return err
		}
		if err := memset0(*p.dst, b.total*p.elem); err != nil {
			return fmt.Errorf("cuda: zero parameters: %w", err)
		}
	}
	return b.allocStepState()
}

// allocStepState allocates what the optimizer step and the lazy gradient zeroing need beside the
// flat buffers (the norm's partial sums; the norm-weight spans of t2_zero_spans) and marks the
// new gradient buffer stale, as after a Step: the first backward pass overwrites it like every
// optimizer step's first, so it runs the same GEMMs (beta = 0) from the start and Options.GEMM
// "tuned" finds every plan a training step uses in its first step. New and NewShard share it.
// (The gradient buffer is still zeroed when it is allocated: the alignment gaps between tensors
// and a shard's padding are never written by a backward pass, and the reduce-scatter reads them.)
func (b *Backend) allocStepState() error {
	var err error
	if b.partial, err = b.alloc(4 * C.T2_NORM_BLOCKS); err != nil {
		return err
	}
	if err := b.allocNormSpans(); err != nil {
		return err
	}
	b.gradsStale = true
	return nil
}

// allocNormSpans uploads the (offset, length) pairs of the gradient tensors that kernels
// accumulate into rather than GEMMs (every RMSNorm weight), for t2_zero_spans.
func (b *Backend) allocNormSpans() error {
	c := b.cfg
	spans := []int64{int64(b.norm), int64(c.HiddenSize)}
	for _, w := range b.layers {
		spans = append(spans, int64(w.ln1), int64(c.HiddenSize), int64(w.ln2), int64(c.HiddenSize),
			int64(w.qn), int64(c.HeadDim), int64(w.kn), int64(c.HeadDim))
	}
	p, err := b.alloc(8 * len(spans))
	if err != nil {
		return err
	}
	b.normSpans, b.nNormSpans = p, len(spans)/2
	if err := statusErr(C.t2_h2d(p, unsafe.Pointer(&spans[0]), csz(8*len(spans)))); err != nil {
		return fmt.Errorf("cuda: upload norm spans: %w", err)
	}
	return nil
}

// clearStaleGrads zeroes the gradient buffer if Step left it stale (gradsStale), for a reader
// that needs the values the buffer stands for.
func (b *Backend) clearStaleGrads() error {
	if !b.gradsStale {
		return nil
	}
	if err := memset0(b.grad, 4*b.total); err != nil {
		return fmt.Errorf("cuda: zero gradients: %w", err)
	}
	b.gradsStale = false
	return nil
}

// lastDot2 returns the index where a layer tensor's suffix starts ("self_attn.k_proj.weight" in
// "model.layers.3.self_attn.k_proj.weight"), or -1 for non-layer tensors.
func lastDot2(name string) int {
	const p = "model.layers."
	if len(name) <= len(p) || name[:len(p)] != p {
		return -1
	}
	for i := len(p); i < len(name); i++ {
		if name[i] == '.' {
			return i + 1
		}
	}
	return -1
}

func (b *Backend) alloc(bytes int) (dptr, error) {
	p, err := malloc(bytes)
	if err != nil {
		return nil, err
	}
	b.held += int64(bytes)
	return p, nil
}

func (b *Backend) upload(w *gpu.Weights) error {
	for _, s := range b.specs {
		if err := h2dF32(off(b.master, b.offs[s.Name], 4), w.Tensors[s.Name]); err != nil {
			return fmt.Errorf("cuda: upload %s: %w", s.Name, err)
		}
	}
	if err := statusErr(C.t2_f32_to_bf16(b.param, f32p(b.master), csz(b.total))); err != nil {
		return fmt.Errorf("cuda: bf16 copy of the weights: %w", err)
	}
	return syncDevice()
}

// pw is the bf16 parameter at element offset o; gw its fp32 gradient.
func (b *Backend) pw(o int) dptr     { return off(b.param, o, 2) }
func (b *Backend) gw(o int) *C.float { return f32p(off(b.grad, o, 4)) }

// enter pins the calling goroutine to its OS thread and selects the backend's device there, for
// the whole operation: CUDA's current device (and so where cudaMalloc allocates, which device's
// default stream a kernel joins, which GPU cuBLAS runs on) is a property of the thread, and a
// goroutine may resume on another thread after any cgo call — one that last ran another rank's
// GPU. Without the pin, a second rank's buffers landed on the first GPU (illegal memory access on
// 2 H100s) or its kernels ran on the first GPU's stream, unordered with its own (wrong sums).
// A successful enter must be paired with a deferred leave; pins nest.
func (b *Backend) enter() error {
	runtime.LockOSThread()
	if b.closed {
		runtime.UnlockOSThread()
		return errClosed
	}
	if err := statusErr(C.t2_set_device(C.int(b.opt.Device))); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cuda: select device %d: %w", b.opt.Device, err)
	}
	return nil
}

// leave ends what enter began.
func (b *Backend) leave() { runtime.UnlockOSThread() }

// Config returns the model configuration.
func (b *Backend) Config() gpu.Config { return b.cfg }

// HeldBytes is the device memory this backend allocated (parameters, optimizer state, activations
// for the largest micro-batch so far), excluding the 32 MiB cuBLAS workspace.
func (b *Backend) HeldBytes() int64 { return b.held }

// LogProbs runs the forward pass with one layer's worth of activation memory and returns per-node
// log-probs and entropies. It discards what a previous Forward kept for Backward.
func (b *Backend) LogProbs(mb *gpu.MicroBatch) (logp, entropy []float32, err error) {
	return b.forward(mb, false)
}

// Forward runs the forward pass keeping activations (or only layer inputs, with Recompute) for
// Backward and returns per-node log-probs and entropies.
func (b *Backend) Forward(mb *gpu.MicroBatch) (logp, entropy []float32, err error) {
	return b.forward(mb, true)
}

// Backward accumulates d/dθ Σ_c dlogp[c]·logp[c] for the last Forward's micro-batch into the
// gradients. dlogp of roots is ignored.
func (b *Backend) Backward(dlogp []float32) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if !b.haveForward {
		return fmt.Errorf("cuda: Backward without a preceding Forward (LogProbs and Backward consume it)")
	}
	if len(dlogp) != b.n {
		return fmt.Errorf("cuda: Backward got %d dlogp values for a %d-node micro-batch", len(dlogp), b.n)
	}
	for i, g := range dlogp {
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			return fmt.Errorf("cuda: Backward: dlogp[%d] = %v is not finite", i, g)
		}
	}
	b.haveForward = false
	if err := b.backward(dlogp); err != nil {
		return err
	}
	return nil
}

// Step clips the global gradient norm to opt.MaxGradNorm, applies torch.optim.AdamW to the fp32
// master weights (refreshing their bf16 copies), zeroes the gradients (lazily: gradsStale) and
// returns the pre-clip norm. A non-finite norm is an error: the gradients are zeroed and the
// weights left unchanged.
func (b *Backend) Step(opt gpu.Optimizer) (float64, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	if err := opt.Validate(); err != nil {
		return 0, err
	}
	if b.stateErr != nil {
		return 0, fmt.Errorf("cuda: step: %w", b.stateErr)
	}
	if b.shard != nil {
		return 0, errSharded
	}
	if err := b.clearStaleGrads(); err != nil { // a second Step with no backward pass between
		return 0, err
	}
	var ss C.double
	s := b.newSeq()
	s.do("gradient norm", func() C.t2_status { return C.t2_sumsq(&ss, f32p(b.partial), f32p(b.grad), csz(b.total)) })
	if s.err != nil {
		return 0, s.err
	}
	norm := math.Sqrt(float64(ss))
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		if err := memset0(b.grad, 4*b.total); err != nil {
			return norm, fmt.Errorf("cuda: zero gradients: %w", err)
		}
		return norm, fmt.Errorf("cuda: gradient norm is %v; step skipped and gradients zeroed", norm)
	}
	scale := 1.0
	if opt.MaxGradNorm > 0 {
		// torch.nn.utils.clip_grad_norm_: coef = max_norm / (total_norm + 1e-6), clamped to 1.
		if c := opt.MaxGradNorm / (norm + 1e-6); c < 1 {
			scale = c
		}
	}
	b.step++
	bc1 := 1 - math.Pow(opt.Beta1, float64(b.step))
	bc2 := 1 - math.Pow(opt.Beta2, float64(b.step))
	s.do("adamw", func() C.t2_status {
		return C.t2_adamw(f32p(b.master), b.param, f32p(b.grad), f32p(b.m), f32p(b.v), csz(b.total),
			C.float(opt.LR), C.float(opt.Beta1), C.float(opt.Beta2), C.float(opt.Eps), C.float(opt.WeightDecay),
			C.float(scale), C.float(bc1), C.float(bc2))
	})
	if err := s.finish("adamw"); err != nil {
		return norm, err
	}
	b.gradsStale = true
	return norm, nil
}

// tensor copies one fp32 tensor of a flat buffer (master or grad) to the host.
func (b *Backend) tensor(buf dptr, s gpu.ParamSpec) ([]float32, error) {
	var out []float32
	return b.tensorInto(buf, s, &out)
}

// tensorInto is tensor into *scratch, grown when too small and returned resliced to the tensor:
// for a checkpoint writer, which is done with one tensor's values before it asks for the next, so
// a save reuses one host buffer instead of allocating (and faulting in) every tensor anew — 7 GB
// for Qwen3-1.7B's weights, 21 GB for its optimizer state.
func (b *Backend) tensorInto(buf dptr, s gpu.ParamSpec, scratch *[]float32) ([]float32, error) {
	n := s.Size()
	if cap(*scratch) < n {
		*scratch = make([]float32, n)
	}
	out := (*scratch)[:n]
	if err := d2hF32(out, off(buf, b.offs[s.Name], 4)); err != nil {
		return nil, fmt.Errorf("cuda: download %s: %w", s.Name, err)
	}
	return out, nil
}

// Weights returns a host copy of the fp32 master weights.
func (b *Backend) Weights() (*gpu.Weights, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	w := &gpu.Weights{Config: b.cfg, Tensors: map[string][]float32{}}
	for _, s := range b.specs {
		t, err := b.weightTensor(s)
		if err != nil {
			return nil, err
		}
		w.Tensors[s.Name] = t
	}
	return w, nil
}

// Gradients returns a host copy of the accumulated fp32 gradients by tensor name (tests, debugging).
func (b *Backend) Gradients() (map[string][]float32, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	if err := b.clearStaleGrads(); err != nil {
		return nil, err
	}
	out := map[string][]float32{}
	for _, s := range b.specs {
		t, err := b.tensor(b.grad, s)
		if err != nil {
			return nil, err
		}
		out[s.Name] = t
	}
	return out, nil
}

// Save writes the master weights as a Hugging Face checkpoint (config.json + safetensors in dtype),
// one tensor at a time.
func (b *Backend) Save(dir string, dtype gpu.DType) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if b.shard != nil && dtype != gpu.BF16 {
		return fmt.Errorf("cuda: a data-parallel rank holds its weights in full only in bfloat16 (the fp32 masters are sharded): save %s, not %s", gpu.BF16, dtype)
	}
	byName := map[string]gpu.ParamSpec{}
	for _, s := range b.specs {
		byName[s.Name] = s
	}
	var scratch []float32 // see tensorInto
	return gpu.SaveCheckpoint(dir, b.cfg, dtype, func(name string) ([]float32, error) {
		s, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("cuda: no tensor %s", name)
		}
		if b.shard == nil {
			return b.tensorInto(b.master, s, &scratch)
		}
		return b.weightTensor(s)
	})
}

// Close frees the device memory and the context. The backend is unusable afterwards.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	if b.ctx != nil { // free on the backend's device, from one thread (see enter)
		if err := b.enter(); err == nil {
			defer b.leave()
		}
	}
	b.closed = true
	var errs []error
	if err := b.act.free(); err != nil {
		errs = append(errs, err)
	}
	if b.prof != nil {
		if err := b.prof.close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range []dptr{b.master, b.param, b.grad, b.m, b.v, b.partial, b.normSpans} {
		if err := free(p); err != nil {
			errs = append(errs, err)
		}
	}
	if b.ctx != nil {
		if err := statusErr(C.t2_destroy(b.ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda: close: %w", err)
	}
	return nil
}
