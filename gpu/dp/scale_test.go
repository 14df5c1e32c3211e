package dp

// The GPU-free half of the scaling measurement (scale_cuda_test.go has the benchmark): settings,
// the synthetic micro-batches, the memory verdict and the step loop, tested here on the cpu backend.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/trainer/prefixtree"
)

// peakBF16 is the dense bf16 tensor-core peak of an H100 SXM (and H200: the same compute die),
// 989 TFLOP/s, the denominator of every MFU this project reports (gpu/cuda's benchmarks too).
const peakBF16 = 989e12

// scaleRecord is one DPSCALE line. MFU is Cost's FLOPs (6·P_layers·tokens + 12·L·q_dim·visible
// pairs + 6·H·V·scored tokens; recomputation not counted) per GPU per second over peakBF16.
type scaleRecord struct {
	Impl          string    `json:"impl"`
	Model         string    `json:"model"`
	Params        int64     `json:"params"`
	Shape         string    `json:"shape"`
	Devices       []int     `json:"devices"`
	World         int       `json:"world"`
	DeviceName    string    `json:"device_name,omitempty"`
	TokensPerGPU  int       `json:"tokens_per_gpu"`
	ScoredPerGPU  int       `json:"scored_per_gpu,omitempty"`
	Recompute     bool      `json:"recompute"`
	Steps         int       `json:"timed_steps,omitempty"`
	StepMS        float64   `json:"step_ms_median,omitempty"`
	StepMSAll     []float64 `json:"step_ms_all,omitempty"`
	FwdBwdMS      float64   `json:"fwd_bwd_ms_median,omitempty"`
	OptMS         float64   `json:"optimizer_ms_median,omitempty"`
	TokensPerS    float64   `json:"tokens_per_s,omitempty"`
	TokensPerSGPU float64   `json:"tokens_per_s_per_gpu,omitempty"`
	MFU           float64   `json:"mfu_per_gpu,omitempty"`
	FLOPsPerGPU   float64   `json:"flops_per_gpu_step,omitempty"`
	PeakMemGB     float64   `json:"peak_mem_gb,omitempty"`
	HeldGB        float64   `json:"held_gb,omitempty"`
	ScalingEff    float64   `json:"scaling_eff,omitempty"`
	NCCL          int       `json:"nccl_version,omitempty"`
	Note          string    `json:"note,omitempty"`
	Error         string    `json:"error,omitempty"`
}

type scaleSettings struct {
	model         string
	cfg           gpu.Config
	tokens        int
	devices       [][]int
	shapes        []string
	warmup, steps int
	recompute     bool
	// progress prints the per-step lines (fmt.Printf on the GPU, t.Logf in tests).
	progress func(format string, args ...any)
}

func envInt(name string, def, lo int) (int, error) {
	s := os.Getenv(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo {
		return 0, fmt.Errorf("%s=%q: want an integer ≥ %d", name, s, lo)
	}
	return v, nil
}

func readScaleSettings() (scaleSettings, error) {
	s := scaleSettings{model: "Qwen3-1.7B", cfg: gpu.Qwen3_1_7B(), progress: func(f string, a ...any) { fmt.Printf(f, a...) }}
	if p := os.Getenv("T2_DP_MODEL"); p != "" {
		cfg, err := gpu.LoadConfig(p)
		if err != nil {
			return s, fmt.Errorf("T2_DP_MODEL: %w", err)
		}
		s.model, s.cfg = p, cfg
	}
	var err error
	if s.tokens, err = envInt("T2_DP_TOKENS_PER_GPU", 16384, 256); err != nil {
		return s, err
	}
	if s.warmup, err = envInt("T2_DP_WARMUP", 2, 1); err != nil {
		return s, err
	}
	if s.steps, err = envInt("T2_DP_STEPS", 6, 5); err != nil {
		return s, err
	}
	rc, err := envInt("T2_DP_RECOMPUTE", 1, 0)
	if err != nil {
		return s, err
	}
	s.recompute = rc != 0
	devs := os.Getenv("T2_DP_DEVICES")
	if devs == "" {
		devs = "0;0,1"
	}
	for _, conf := range strings.FieldsFunc(devs, func(r rune) bool { return r == ';' || r == ' ' }) {
		var list []int
		for _, d := range strings.Split(conf, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(d))
			if err != nil || v < 0 || slices.Contains(list, v) {
				return s, fmt.Errorf("T2_DP_DEVICES=%q: %q is not a list of distinct CUDA ordinals", devs, conf)
			}
			list = append(list, v)
		}
		s.devices = append(s.devices, list)
	}
	shapes := os.Getenv("T2_DP_SHAPES")
	if shapes == "" {
		shapes = "tree,chain"
	}
	for _, sh := range strings.Split(shapes, ",") {
		if sh != "tree" && sh != "chain" {
			return s, fmt.Errorf("T2_DP_SHAPES=%q: %q is neither tree nor chain", shapes, sh)
		}
		s.shapes = append(s.shapes, sh)
	}
	return s, nil
}

// tau2Tree is one GRPO group shaped like τ² rollouts as the trainer packs them (one sequence per
// policy LLM call, AReaL's individual export), packed by trainer/prefixtree into one micro-batch
// of exactly `nodes` nodes: 8 conversations share a system prompt with tool schemas (1/8 of the
// nodes); each makes 4 calls, call c being the conversation so far plus turn c (a user or tool
// message, then the completion, whose second half of the turn carries the loss).
func tau2Tree(rng *rand.Rand, vocab, nodes int) (*gpu.MicroBatch, error) {
	const convs, calls = 8, 4
	turn := nodes * 7 / 8 / (convs * calls)
	prompt := nodes - convs*calls*turn
	tok := func() int32 { return int32(rng.IntN(vocab)) }
	shared := make([]int32, prompt)
	for i := range shared {
		shared[i] = tok()
	}
	var seqs []prefixtree.Sequence
	for s := range convs {
		conv := slices.Clone(shared)
		for c := range calls {
			for k := range turn {
				t := tok()
				if c == 0 && k == 0 {
					t = int32(s) // conversations diverge at their first token: exactly `nodes` nodes
				}
				conv = append(conv, t)
			}
			loss := make([]bool, len(conv))
			for i := len(conv) - turn/2; i < len(conv); i++ {
				loss[i] = true
			}
			seqs = append(seqs, prefixtree.Sequence{Tokens: slices.Clone(conv), Loss: loss})
		}
	}
	p, err := prefixtree.Pack(seqs, prefixtree.Config{MaxTokensPerMB: nodes, MBOverheadTokens: 128})
	if err != nil {
		return nil, err
	}
	if len(p.MicroBatches) != 1 || p.MicroBatches[0].Len() != nodes {
		return nil, fmt.Errorf("τ² group packed into %d micro-batches (%d tokens), want one of %d", len(p.MicroBatches), p.PackedTokens, nodes)
	}
	return &p.MicroBatches[0].MicroBatch, nil
}

// scaleBatches is one step's micro-batches: one of `tokens` nodes per rank, so Assign gives each
// rank one (equal costs).
func scaleBatches(rng *rand.Rand, cfg gpu.Config, shape string, tokens, world int) ([]*gpu.MicroBatch, error) {
	mbs := make([]*gpu.MicroBatch, world)
	for r := range mbs {
		if shape == "chain" {
			ids := make([]int32, tokens)
			for i := range ids {
				ids[i] = int32(rng.IntN(cfg.VocabSize))
			}
			mbs[r] = gpu.Chain(ids)
			continue
		}
		mb, err := tau2Tree(rng, cfg.VocabSize, tokens)
		if err != nil {
			return nil, err
		}
		mbs[r] = mb
	}
	return mbs, nil
}

// scaleStep is one timed training step on g: forward, loss, backward of every micro-batch on its
// rank, then the collective optimizer step.
func scaleStep(g *Group, mbs []*gpu.MicroBatch, opt gpu.Optimizer) (fb, step time.Duration, err error) {
	start := time.Now()
	err = g.ForwardBackwardParallel(mbs, g.Assign(mbs), func(_, i int, logp, _ []float32) ([]float32, error) {
		dl := make([]float32, len(logp))
		for c := range dl {
			if mbs[i].Scored(c) {
				dl[c] = 1e-4 * float32(c%7-3)
			}
		}
		return dl, nil
	})
	if err != nil {
		return 0, 0, err
	}
	mid := time.Now()
	if _, err := g.Step(opt); err != nil {
		return 0, 0, err
	}
	return mid.Sub(start), time.Since(mid), nil
}

func medianMS(ds []time.Duration) float64 {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = d.Seconds() * 1e3
	}
	slices.Sort(ms)
	if len(ms)%2 == 1 {
		return ms[len(ms)/2]
	}
	return (ms[len(ms)/2-1] + ms[len(ms)/2]) / 2
}

// memoryVerdict says whether a rank of cfg over world GPUs can be built on a device of total
// bytes: the memory model's steady state (12 B/param ÷ world + 6) and the construction's
// transient (cuda.New holds the unsharded 18 B/param before Group's Shard cuts it), activations
// excluded. An empty string means it fits as far as the model says.
func memoryVerdict(cfg gpu.Config, world int, total int64) string {
	m, _ := MemoryModel(cfg, cfg.NumParams(), "cuda", world, ShardOptimizer)
	if world == 1 {
		m, _ = MemoryModel(cfg, cfg.NumParams(), "cuda", 1, Replicated)
	}
	// Ranks are built as their shards (cuda.NewShard), so the steady state is also the peak of
	// construction, less the scratch buffer of the largest tensor.
	gib := func(b int64) float64 { return float64(b) / (1 << 30) }
	if m.Bytes > total {
		return fmt.Sprintf("does not fit: the memory model gives %.1f GiB per rank (%.2f B/param, activations excluded) on a %.1f GiB device",
			gib(m.Bytes), m.BytesPerParam(), gib(total))
	}
	return ""
}

// scaleOne runs one shape's warm-up and timed steps on g and fills rec; mem, when set, fills the
// memory fields after the timed steps.
func scaleOne(g *Group, s scaleSettings, shape string, rec scaleRecord, mem func(*scaleRecord)) scaleRecord {
	rec.Shape = shape
	world := g.World()
	rng := rand.New(rand.NewPCG(uint64(world), 16))
	o := gpu.DefaultOptimizer()
	var fbs, opts, steps []time.Duration
	for k := range s.warmup + s.steps {
		mbs, err := scaleBatches(rng, s.cfg, shape, s.tokens, world)
		if err != nil {
			rec.Error = err.Error()
			return rec
		}
		if k == 0 {
			var flops float64
			scored := 0
			for _, mb := range mbs {
				flops += Cost(s.cfg, mb)
				for c := range mb.Tokens {
					if mb.Scored(c) && mb.Parent[c] >= 0 {
						scored++
					}
				}
			}
			rec.FLOPsPerGPU, rec.ScoredPerGPU = flops/float64(world), scored/world
		}
		fb, st, err := scaleStep(g, mbs, o)
		if err != nil {
			rec.Error = fmt.Sprintf("step %d: %v", k+1, err)
			s.progress("dp-scale: devices %v %s: %s\n", rec.Devices, shape, rec.Error)
			return rec
		}
		what := "warm-up"
		if k >= s.warmup {
			what = "timed"
			fbs, opts, steps = append(fbs, fb), append(opts, st), append(steps, fb+st)
		}
		s.progress("dp-scale: devices %v %s: %s step %d: %.1f ms (forward/backward %.1f, optimizer step %.1f)\n",
			rec.Devices, shape, what, k+1, (fb+st).Seconds()*1e3, fb.Seconds()*1e3, st.Seconds()*1e3)
	}
	rec.Steps = len(steps)
	for _, d := range steps {
		rec.StepMSAll = append(rec.StepMSAll, float64(d.Microseconds())/1e3)
	}
	rec.StepMS, rec.FwdBwdMS, rec.OptMS = medianMS(steps), medianMS(fbs), medianMS(opts)
	sec := rec.StepMS / 1e3
	rec.TokensPerS = float64(world*s.tokens) / sec
	rec.TokensPerSGPU = float64(s.tokens) / sec
	rec.MFU = rec.FLOPsPerGPU / sec / peakBF16
	if mem != nil {
		mem(&rec)
	}
	return rec
}

func TestScaleSettings(t *testing.T) {
	for _, k := range []string{"T2_DP_MODEL", "T2_DP_TOKENS_PER_GPU", "T2_DP_DEVICES", "T2_DP_SHAPES", "T2_DP_WARMUP", "T2_DP_STEPS", "T2_DP_RECOMPUTE"} {
		t.Setenv(k, "")
	}
	s, err := readScaleSettings()
	if err != nil {
		t.Fatal(err)
	}
	if s.tokens != 16384 || !reflect.DeepEqual(s.devices, [][]int{{0}, {0, 1}}) || !reflect.DeepEqual(s.shapes, []string{"tree", "chain"}) ||
		!s.recompute || s.warmup != 2 || s.steps != 6 || s.cfg.NumParams() != gpu.Qwen3_1_7B().NumParams() {
		t.Fatalf("defaults: %+v", s)
	}
	t.Setenv("T2_DP_MODEL", "../../deploy/models/qwen3-8b/config.json")
	t.Setenv("T2_DP_DEVICES", "0,1 2,3;4")
	t.Setenv("T2_DP_RECOMPUTE", "0")
	if s, err = readScaleSettings(); err != nil {
		t.Fatal(err)
	}
	if s.cfg.HiddenSize != 4096 || !reflect.DeepEqual(s.devices, [][]int{{0, 1}, {2, 3}, {4}}) || s.recompute {
		t.Fatalf("set: %+v", s)
	}
	for _, bad := range []struct{ key, value, want string }{
		{"T2_DP_MODEL", "testdata/none/config.json", "T2_DP_MODEL"},
		{"T2_DP_TOKENS_PER_GPU", "100", "≥ 256"},
		{"T2_DP_DEVICES", "0,0", "distinct"},
		{"T2_DP_DEVICES", "0,x", "distinct"},
		{"T2_DP_SHAPES", "tree,flat", "neither"},
		{"T2_DP_STEPS", "3", "≥ 5"},
	} {
		t.Run(bad.key+"="+bad.value, func(t *testing.T) {
			t.Setenv(bad.key, bad.value)
			if _, err := readScaleSettings(); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("err = %v, want one containing %q", err, bad.want)
			}
		})
	}
}

// TestTau2Tree: the synthetic τ² group is one valid micro-batch of exactly the asked nodes, with
// loss on the completions only, and costs less than a causal chain of as many tokens (fewer
// visible pairs, fewer scored nodes).
func TestTau2Tree(t *testing.T) {
	cfg := gpu.Qwen3_1_7B()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{256, 1000, 16384} {
		mb, err := tau2Tree(rng, cfg.VocabSize, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := mb.Validate(cfg.VocabSize); err != nil || mb.Len() != n {
			t.Fatalf("%d nodes: len %d, %v", n, mb.Len(), err)
		}
		scored := 0
		for c := range mb.Tokens {
			if mb.Scored(c) {
				scored++
			}
		}
		if turn := n * 7 / 8 / 32; scored != 32*(turn/2) {
			t.Fatalf("%d nodes: %d scored, want %d", n, scored, 32*(turn/2))
		}
		chain, _ := scaleBatches(rng, cfg, "chain", n, 1)
		if Cost(cfg, mb) >= Cost(cfg, chain[0]) {
			t.Fatalf("%d nodes: tree cost %g ≥ chain cost %g", n, Cost(cfg, mb), Cost(cfg, chain[0]))
		}
	}
}

// TestMemoryVerdict: on an 80 GB device the 1.7B trainer fits on one and two GPUs; Qwen3-8B does
// not fit two (12 B/param after sharding) and fits eight (7.5 B/param: 57 GiB, each rank built as
// its shard by cuda.NewShard).
func TestMemoryVerdict(t *testing.T) {
	const h100 = 79 << 30
	for _, c := range []struct {
		cfg   gpu.Config
		world int
		want  string
	}{
		{gpu.Qwen3_1_7B(), 1, ""}, {gpu.Qwen3_1_7B(), 2, ""}, {gpu.Qwen3_1_7B(), 8, ""},
		{gpu.Qwen3_8B(), 2, "does not fit"}, {gpu.Qwen3_8B(), 8, ""},
	} {
		v := memoryVerdict(c.cfg, c.world, h100)
		if c.want == "" && v != "" || !strings.Contains(v, c.want) {
			t.Errorf("%d hidden on %d GPUs: %q, want %q", c.cfg.HiddenSize, c.world, v, c.want)
		}
	}
}

// TestScaleOneOnCPU runs the measurement loop on a 2-rank cpu group: every step runs, the record's
// throughput, FLOPs and MFU follow from the median step and Cost.
func TestScaleOneOnCPU(t *testing.T) {
	cfg := gpu.TinyConfig()
	w, _ := gpu.NewRandomWeights(cfg, 3)
	g := newGroup(t, w, 2)
	s := scaleSettings{model: "tiny", cfg: cfg, tokens: 256, warmup: 1, steps: 5, progress: t.Logf}
	for _, shape := range []string{"tree", "chain"} {
		called := false
		r := scaleOne(g, s, shape, scaleRecord{Devices: []int{0, 1}}, func(*scaleRecord) { called = true })
		if r.Error != "" || !called || r.Steps != 5 || len(r.StepMSAll) != 5 {
			t.Fatalf("%s: %+v", shape, r)
		}
		if r.TokensPerS <= 0 || math.Abs(r.TokensPerS-2*r.TokensPerSGPU) > 1e-6*r.TokensPerS {
			t.Fatalf("%s: tokens/s %v, per GPU %v", shape, r.TokensPerS, r.TokensPerSGPU)
		}
		if mfu := r.FLOPsPerGPU / (r.StepMS / 1e3) / peakBF16; r.FLOPsPerGPU <= 0 || math.Abs(r.MFU-mfu) > 1e-9*mfu {
			t.Fatalf("%s: MFU %v from %v FLOPs in %v ms", shape, r.MFU, r.FLOPsPerGPU, r.StepMS)
		}
	}
}
