package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"tau2rl/gpu"
	"tau2rl/lib/cputime"
)

// tau2Load is the τ² serving load's step as the sampler's engine hands it to the Decoder
// (docs/PERFORMANCE.md "τ²'s serving load"): tasks × samples conversations decoding one token
// each after a shared system prefix, their task's opening and their own suffix, with block tables
// shared the way the radix prefix cache shares them (full blocks only: the system prompt's full
// blocks by all, the blocks up to the end of a task's opening by its samples, the rest — from the
// block the opening ends in — each conversation's own). prefill adds the chunks a step carries
// beside the decoding: a conversation's tool result, a new sample's prompt after its cached
// prefix, a new task's opening after the system prompt.
type tau2Load struct {
	tasks, samples  int
	sys, task       int // tokens of the shared system prefix and of each task's opening
	maxSuffix       int // each conversation's own tokens, uniform in [0, maxSuffix]
	blockSize       int
	prefill, fresh  bool // add prefill chunks; add a prompt with nothing cached (Start 0)
	lone, shortTail bool // add a decode token sharing nothing; a short chunk (≤ one CUDA-core tile)
}

// step draws one step of the load.
func (l tau2Load) step(rng *rand.Rand) []gpu.ServeSeq {
	bs := l.blockSize
	next := int32(0)
	take := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = next
			next++
		}
		return out
	}
	sysBlocks := take(l.sys / bs)
	taskBlocks := make([][]int32, l.tasks)
	for t := range taskBlocks {
		taskBlocks[t] = take((l.sys+l.task)/bs - l.sys/bs)
	}
	params := gpu.SampleParams{Temperature: 1, TopP: 1}
	seq := func(blocks []int32, start, ntok int, sample bool) gpu.ServeSeq {
		need := (start + ntok + bs - 1) / bs
		tbl := append(slices.Clone(blocks), take(need-len(blocks))...)
		toks := make([]int32, ntok)
		for i := range toks {
			toks[i] = int32(rng.IntN(151936))
		}
		return gpu.ServeSeq{Tokens: toks, Start: start, Blocks: tbl, Sample: sample, Params: params, Uniform: rng.Float64()}
	}
	var seqs []gpu.ServeSeq
	for t := range l.tasks {
		prefix := append(slices.Clone(sysBlocks), taskBlocks[t]...)
		for range l.samples {
			seqs = append(seqs, seq(prefix, l.sys+l.task+rng.IntN(l.maxSuffix+1), 1, true))
		}
	}
	if l.prefill {
		prefix := append(slices.Clone(sysBlocks), taskBlocks[0]...)
		seqs = append(seqs, seq(prefix, l.sys+l.task+900, 180, true)) // a tool result
		if l.tasks > 1 {
			prefix = append(slices.Clone(sysBlocks), taskBlocks[1]...)
		}
		cached := (l.sys + l.task) / bs * bs
		seqs = append(seqs, seq(prefix, cached, l.sys+l.task-cached+120, true)) // a new sample's prompt
		seqs = append(seqs, seq(sysBlocks, l.sys/bs*bs, 400, false))            // a new task's opening, first chunk
	}
	if l.fresh {
		seqs = append(seqs, seq(nil, 0, 37, true))
	}
	if l.lone {
		seqs = append(seqs, seq(nil, 700, 1, true))
	}
	if l.shortTail {
		seqs = append(seqs, seq(sysBlocks, l.sys/bs*bs+3, 5, true))
	}
	rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	return seqs
}

// tau2 is the measured load: 5,000-token system prefix, 300-token task openings, own suffixes of
// 0–2,100 tokens, 16-token blocks.
func tau2(tasks int, prefill bool) tau2Load {
	return tau2Load{tasks: tasks, samples: 8, sys: 5000, task: 300, maxSuffix: 2100, blockSize: 16, prefill: prefill}
}

// h200 is Qwen3-1.7B's planner on an H200 (132 SMs) at the given split.
func h200(itemsPerSM int) planKnobs {
	kv := gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 1 << 16}
	return knobsFor(gpu.Qwen3_1_7B(), kv, 132, itemsPerSM, false, true)
}

// planDiff says how two plans differ ("" when every field and array is identical).
func planDiff(got *stepPlan, want stepPlan) string {
	if got.n != want.n || got.pure != want.pure || got.maxRows != want.maxRows || got.nslots != want.nslots || got.groups != want.groups {
		return fmt.Sprintf("n/pure/maxRows/nslots/groups %d/%v/%d/%d/%d, want %d/%v/%d/%d/%d", got.n, got.pure, got.maxRows,
			got.nslots, got.groups, want.n, want.pure, want.maxRows, want.nslots, want.groups)
	}
	for _, a := range []struct {
		name      string
		got, want []int32
	}{{"tokens", got.tokens, want.tokens}, {"positions", got.positions, want.positions}, {"slots", got.slots, want.slots},
		{"send", got.send, want.send}, {"tokInfo", got.tokInfo, want.tokInfo}, {"items", got.items, want.items},
		{"tables", got.tables, want.tables}, {"mitems", got.mitems, want.mitems}, {"mrows", got.mrows, want.mrows},
		{"rowIdx", got.rowIdx, want.rowIdx}, {"topk", got.topk, want.topk},
		{"itemInts", got.itemInts(), slices.Concat(want.items, want.mitems, want.mrows)}} {
		if !slices.Equal(a.got, a.want) {
			i := 0
			for i < min(len(a.got), len(a.want)) && a.got[i] == a.want[i] {
				i++
			}
			return fmt.Sprintf("%s: %d values, want %d; first difference at %d", a.name, len(a.got), len(a.want), i)
		}
	}
	if !slices.Equal(got.fparams, want.fparams) || !slices.Equal(got.unif, want.unif) {
		return "sampling parameters differ"
	}
	return ""
}

// TestPlanMatchesReference pins the planner to the plan the Decoder made before it moved out of
// decoder.go (planRef, the old code): the same item lists, rows, slots and tables, value for
// value, over τ² steps of every size and split, prefill chunks, fresh prompts, lone and short
// sequences, other GQA shapes (g = 4 as Qwen3-8B; g = 3, which the tensor-core kernel cannot
// take) and the kernel choices. One planner runs every case in turn, twice, so state left over
// from a bigger or different step would show.
func TestPlanMatchesReference(t *testing.T) {
	type tc struct {
		name  string
		knobs planKnobs
		load  tau2Load
	}
	small := tau2Load{tasks: 3, samples: 5, sys: 77, task: 21, maxSuffix: 60, blockSize: 4, prefill: true, fresh: true, lone: true, shortTail: true}
	g4 := knobsFor(gpu.Qwen3_8B(), gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 1 << 16}, 132, 8, false, true)
	g3 := planKnobs{g: 3, nkv: 4, blockSize: 4, sms: 132, itemsPerSM: 4, ownMMA: true}
	g1 := planKnobs{g: 1, nkv: 2, blockSize: 4, sms: 7, itemsPerSM: 2, ownMMA: true}
	var cases []tc
	for _, ips := range []int{4, 8, 16} {
		for _, tasks := range []int{8, 16, 32} {
			cases = append(cases, tc{fmt.Sprintf("tau2 %d×8 ips %d", tasks, ips), h200(ips), tau2(tasks, false)},
				tc{fmt.Sprintf("tau2 %d×8+prefill ips %d", tasks, ips), h200(ips), tau2(tasks, true)})
		}
	}
	noMMA, cudaCoreOwn, unsplit := h200(4), h200(4), h200(0)
	noMMA.noMMA, cudaCoreOwn.ownMMA = true, false
	smallKnobs := h200(4)
	smallKnobs.blockSize = 4
	smallNoMMA, smallOld := smallKnobs, smallKnobs
	smallNoMMA.noMMA, smallOld.ownMMA = true, false
	mixed := tau2(8, true)
	mixed.fresh, mixed.lone, mixed.shortTail = true, true, true
	cases = append(cases,
		tc{"noMMA", noMMA, tau2(8, true)},
		tc{"own blocks on CUDA cores", cudaCoreOwn, tau2(8, true)},
		tc{"itemsPerSM 0", unsplit, tau2(8, false)},
		tc{"all kinds", h200(4), mixed},
		tc{"small", smallKnobs, small},
		tc{"small noMMA", smallNoMMA, small},
		tc{"small own on CUDA cores", smallOld, small},
		tc{"one task", h200(4), tau2Load{tasks: 1, samples: 8, sys: 5000, task: 300, maxSuffix: 2100, blockSize: 16}},
		tc{"one sample per task", h200(4), tau2Load{tasks: 9, samples: 1, sys: 100, task: 300, maxSuffix: 300, blockSize: 16, prefill: true}},
		tc{"no shared blocks", h200(4), tau2Load{tasks: 4, samples: 4, sys: 10, task: 5, maxSuffix: 100, blockSize: 16}},
		tc{"g=4", g4, tau2(8, true)},
		tc{"g=3", g3, small},
		tc{"g=1", g1, small},
		tc{"block size 1", planKnobs{g: 2, nkv: 2, blockSize: 1, sms: 5, itemsPerSM: 4, ownMMA: true}, tau2Load{tasks: 2, samples: 3, sys: 9, task: 4, maxSuffix: 9, blockSize: 1, prefill: true}},
	)
	var pl planner
	for pass := range 2 {
		for ci, c := range cases {
			seqs := c.load.step(rand.New(rand.NewPCG(uint64(ci), 1)))
			want := planRef(c.knobs, seqs)
			pl.planKnobs = c.knobs
			if d := planDiff(pl.plan(seqs), want); d != "" {
				t.Errorf("pass %d, %s: %s", pass, c.name, d)
			}
			if pl.miscounts != 0 {
				t.Fatalf("pass %d, %s: layOut sized the items wrong", pass, c.name)
			}
		}
	}
	// The cascade must have been exercised: the τ² step groups by system prompt, then by task.
	pl.planKnobs = h200(4)
	if p := pl.plan(tau2(8, false).step(rand.New(rand.NewPCG(1, 1)))); p.groups != 9 {
		t.Errorf("τ² 8×8 step: %d shared ranges, want 9 (the system prompt, then 8 task openings)", p.groups)
	}
}

// TestPlanAllocationFree checks the planner's steady state: once its buffers have grown to the
// batch, a step — even one of different lengths and sharing — allocates nothing.
func TestPlanAllocationFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	steps := [][]gpu.ServeSeq{tau2(8, true).step(rng), tau2(8, true).step(rng), tau2(8, false).step(rng)}
	var pl planner
	pl.planKnobs = h200(16)
	for _, s := range steps {
		pl.plan(s).itemInts()
	}
	i := 0
	if n := testing.AllocsPerRun(20, func() {
		pl.plan(steps[i%len(steps)]).itemInts()
		i++
	}); n != 0 {
		t.Errorf("%v allocations per planned step, want 0", n)
	}
}

// BenchmarkPlanTau2 is the serving Decoder's host-side planning of one τ² step (tau2Load:
// 5,000-token system prefix, 300-token task openings, 0–2,100-token own suffixes, 16-token
// blocks; Qwen3-1.7B on an H200's 132 SMs): seqs decode tokens in tasks of 8, "+prefill" adding
// three prefill chunks, at itemsPerSM 4 (the default), 8 and 16. "before" is the planner as it was
// (planRef), "after" the current one, reused across steps as the Decoder reuses it.
func BenchmarkPlanTau2(b *testing.B) {
	for _, c := range []struct {
		name    string
		tasks   int
		prefill bool
	}{{"seqs=64", 8, false}, {"seqs=64+prefill", 8, true}, {"seqs=128+prefill", 16, true}, {"seqs=256+prefill", 32, true}} {
		seqs := tau2(c.tasks, c.prefill).step(rand.New(rand.NewPCG(5, 6)))
		for _, ips := range []int{4, 8, 16} {
			knobs := h200(ips)
			b.Run(fmt.Sprintf("%s/ips=%d/before", c.name, ips), func(b *testing.B) {
				b.ReportAllocs()
				var p stepPlan
				c0 := cputime.Now()
				for b.Loop() {
					p = planRef(knobs, seqs)
					_ = slices.Concat(p.items, p.mitems, p.mrows)
				}
				cputime.Report(b, c0, cputime.Microseconds)
				b.ReportMetric(float64((len(p.items)+len(p.mitems))/8), "items")
			})
			b.Run(fmt.Sprintf("%s/ips=%d/after", c.name, ips), func(b *testing.B) {
				b.ReportAllocs()
				pl := planner{planKnobs: knobs}
				p := pl.plan(seqs) // the buffers grow to the batch once, as in a Decoder's first step
				c0 := cputime.Now()
				for b.Loop() {
					p = pl.plan(seqs)
					p.itemInts()
				}
				cputime.Report(b, c0, cputime.Microseconds)
				b.ReportMetric(float64((len(p.items)+len(p.mitems))/8), "items")
			})
		}
	}
}

// FuzzPlanMatchesReference compares the planner with the old function (planRef) on random steps
// drawn from a seed: block tables over a small pool, so blocks are shared by chance, at different
// depths and not only as prefixes (nothing the engine does, all of which the old code handled);
// contexts seen partly to a block; decode tokens, chunks and fresh prompts; GQA groups, block
// sizes, splits and kernel choices of every kind. One planner takes all the steps of a run, so a
// step inherits the buffers of a different one.
func FuzzPlanMatchesReference(f *testing.F) {
	for seed := range uint64(40) {
		f.Add(seed)
	}
	var pl planner
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 7))
		gs := []int{1, 2, 3, 4, 8, 16}
		kn := planKnobs{g: gs[rng.IntN(len(gs))], nkv: 1 + rng.IntN(4), blockSize: 1 << rng.IntN(5),
			sms: 1 + rng.IntN(140), itemsPerSM: rng.IntN(17), noMMA: rng.IntN(5) == 0, ownMMA: rng.IntN(4) != 0}
		pool := 2 + rng.IntN(40)
		shared := make([]int32, 2+rng.IntN(30)) // a common prefix many tables start with
		for i := range shared {
			shared[i] = int32(rng.IntN(pool))
		}
		seqs := make([]gpu.ServeSeq, 1+rng.IntN(40))
		for i := range seqs {
			s := &seqs[i]
			switch rng.IntN(4) {
			case 0: // a chunk
				s.Tokens = make([]int32, 2+rng.IntN(80))
			case 1: // a fresh prompt or a decode token without context
				s.Tokens = make([]int32, 1+rng.IntN(20))
			default:
				s.Tokens = make([]int32, 1)
			}
			bs := kn.blockSize
			if rng.IntN(6) > 0 {
				s.Start = rng.IntN(len(shared)*bs + 3*bs)
			}
			need := (s.Start + len(s.Tokens) + bs - 1) / bs
			if rng.IntN(3) > 0 {
				s.Blocks = append(s.Blocks, shared[:min(need, rng.IntN(len(shared)+1))]...)
			}
			for len(s.Blocks) < need+rng.IntN(3) {
				s.Blocks = append(s.Blocks, int32(rng.IntN(pool)))
			}
			s.Sample = rng.IntN(3) > 0
			s.Params, s.Uniform = gpu.SampleParams{Temperature: rng.Float32(), TopK: int32(rng.IntN(5))}, rng.Float64()
		}
		want := planRef(kn, seqs)
		pl.planKnobs = kn
		if d := planDiff(pl.plan(seqs), want); d != "" {
			t.Fatalf("knobs %+v, %d sequences: %s", kn, len(seqs), d)
		}
		if pl.miscounts != 0 {
			t.Fatalf("knobs %+v: layOut sized the items wrong", kn)
		}
	})
}
