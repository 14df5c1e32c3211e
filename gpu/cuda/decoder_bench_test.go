//go:build cuda

package cuda

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
)

// serveRecord is one sampler benchmark result (T2_REPORT_DIR/go_serve_bench.jsonl).
type serveRecord struct {
	Name         string  `json:"name"`
	Device       string  `json:"device"`
	Batch        int     `json:"batch"`
	Context      int     `json:"context"`
	StepMS       float64 `json:"step_ms"`
	TokensPerSec float64 `json:"tokens_per_s"`
	FloorMS      float64 `json:"floor_ms,omitempty"`   // weights + KV bytes read / copy bandwidth
	OverFloor    float64 `json:"over_floor,omitempty"` // StepMS / FloorMS
	MFU          float64 `json:"mfu,omitempty"`
	CopyGBs      float64 `json:"copy_gb_s,omitempty"`
	Note         string  `json:"note,omitempty"`
}

func saveServeRecord(b *testing.B, r serveRecord) {
	b.Logf("%s: %.3f ms/step, %.0f tok/s, floor %.3f ms (%.2fx), MFU %.1f%% %s", r.Name, r.StepMS, r.TokensPerSec, r.FloorMS,
		r.OverFloor, 100*r.MFU, r.Note)
	dir := os.Getenv("T2_REPORT_DIR")
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "go_serve_bench.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	j, _ := json.Marshal(r)
	fmt.Fprintf(f, "%s\n", j)
}

// weightBytes is the bf16 weights one decode step reads (every matrix once; a tied head once).
func weightBytes(c gpu.Config) float64 {
	var n int64
	for _, s := range gpu.ParamSpecs(c) {
		n += int64(s.Size())
	}
	return 2 * float64(n)
}

// BenchmarkDecode times one decode step (one new token per sequence, sampled at temperature 1)
// at batch 1, 16, 64 and 256 over 4096-token contexts (2048 at batch 256: 256 distinct 4k
// contexts need 120 GB of bf16 KV cache, more than an 80 GB card), each sequence with its own
// blocks, the cache filled with random values instead of a prefill. The floor is the bytes a step
// must read (weights + every sequence's KV) over the measured device copy bandwidth.
// T2_BENCH_SHAPES narrows the shapes ("0.6B", "1.7B").
func BenchmarkDecode(b *testing.B) {
	info, err := Device(0)
	if err != nil {
		b.Skip(err)
	}
	bw, err := copyBandwidth()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("copy bandwidth %.0f GB/s", bw/1e9)
	for _, m := range []struct {
		name string
		cfg  gpu.Config
	}{{"0.6B", gpu.Qwen3_0_6B()}, {"1.7B", gpu.Qwen3_1_7B()}} {
		if sel := os.Getenv("T2_BENCH_SHAPES"); sel != "" && !strings.Contains(","+sel+",", ","+m.name+",") {
			continue
		}
		const bs = 16
		kv := gpu.KVCacheSpec{BlockSize: bs, NumBlocks: 256 * (2048 + bs) / bs}
		d, err := NewDecoder(benchWeights(m.cfg), kv)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.fillCacheRandom(7); err != nil {
			b.Fatal(err)
		}
		for _, sh := range []struct{ batch, ctx int }{{1, 4096}, {16, 4096}, {64, 4096}, {256, 2048}} {
			b.Run(fmt.Sprintf("%s/batch%d/ctx%d", m.name, sh.batch, sh.ctx), func(b *testing.B) {
				nb := (sh.ctx + bs) / bs
				rng := rand.New(rand.NewPCG(1, uint64(sh.batch)))
				seqs := make([]gpu.ServeSeq, sh.batch)
				for i := range seqs {
					blocks := make([]int32, nb)
					for k := range blocks {
						blocks[k] = int32(i*nb + k)
					}
					seqs[i] = gpu.ServeSeq{Tokens: []int32{int32(rng.IntN(m.cfg.VocabSize))}, Start: sh.ctx, Blocks: blocks,
						Sample: true, Params: gpu.SampleParams{Temperature: 1, TopP: 1}, Uniform: rng.Float64()}
				}
				kvRead := float64(sh.batch) * float64(sh.ctx+1) * float64(m.cfg.KVBytesPerToken(2))
				floor := (weightBytes(m.cfg) + kvRead) / bw // bw: bytes read + written per second of a copy
				modes := []bool{false}
				if sh.batch <= 16 {
					modes = append(modes, true) // also without CUDA graphs: what the launches cost
				}
				for _, eager := range modes {
					d.noGraphs = eager
					for range 3 {
						if _, err := d.Step(seqs); err != nil {
							b.Fatal(err)
						}
					}
					start := time.Now()
					reps := max(b.N, 20)
					for range reps {
						if _, err := d.Step(seqs); err != nil {
							b.Fatal(err)
						}
					}
					el := time.Since(start).Seconds() / float64(reps)
					note := ""
					if eager {
						note = "no CUDA graphs"
					}
					saveServeRecord(b, serveRecord{Name: "go/decode/" + m.name, Device: info.Name, Batch: sh.batch, Context: sh.ctx,
						StepMS: el * 1e3, TokensPerSec: float64(sh.batch) / el, FloorMS: floor * 1e3, OverFloor: el / floor,
						CopyGBs: bw / 1e9, Note: note})
				}
				d.noGraphs = false
				if sh.batch == 1 || sh.batch == 64 {
					profileDecode(b, d, fmt.Sprintf("decode-%s-batch%d", m.name, sh.batch), seqs)
				}
			})
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// profileDecode runs 5 steps with the per-operation profiler and logs (and writes to
// $T2_REPORT_DIR/profile-<name>.txt) the device time per operation and step.
func profileDecode(b *testing.B, d *Decoder, name string, seqs []gpu.ServeSeq) {
	if err := d.setProfiling(true); err != nil {
		b.Fatal(err)
	}
	defer d.setProfiling(false)
	const steps = 5
	for range steps {
		if _, err := d.Step(seqs); err != nil {
			b.Fatal(err)
		}
	}
	var sb strings.Builder
	var total float64
	ops := d.prof.sorted()
	for _, o := range ops {
		total += o.MS
	}
	fmt.Fprintf(&sb, "%s: %.3f ms of device time per step\n", name, total/steps)
	for _, o := range ops {
		fmt.Fprintf(&sb, "  %-28s %5d launches/step %8.3f ms/step %5.1f%%\n", o.Op, o.Calls/steps, o.MS/steps, 100*o.MS/total)
	}
	b.Log(sb.String())
	writeReport(b, "profile-"+name, sb.String())
}

// prefillFlops is the forward FLOPs of a one-sequence prefill of t tokens with the LM head on the
// last row only: 2 per weight per token in the layers, 4·d per visible (query, key) pair and head.
func prefillFlops(c gpu.Config, t int) float64 {
	H, I, L := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.NumHiddenLayers)
	qd, kvd := float64(c.QDim()), float64(c.KVDim())
	layer := H*(qd+2*kvd) + qd*H + 3*H*I
	pairs := float64(t) * float64(t+1) / 2
	return 2*L*layer*float64(t) + 2*float64(c.VocabSize)*H + 4*L*qd*pairs
}

// BenchmarkPrefill times a one-shot prefill of one 4096- or 16384-token prompt (sampling its next
// token), and a 4096-token prompt after a cached 12288-token prefix (the paged kernel's prefill
// path: a prefix-cache hit or a chunked prefill's last chunk).
func BenchmarkPrefill(b *testing.B) {
	info, err := Device(0)
	if err != nil {
		b.Skip(err)
	}
	for _, m := range []struct {
		name string
		cfg  gpu.Config
	}{{"0.6B", gpu.Qwen3_0_6B()}, {"1.7B", gpu.Qwen3_1_7B()}} {
		if sel := os.Getenv("T2_BENCH_SHAPES"); sel != "" && !strings.Contains(","+sel+",", ","+m.name+",") {
			continue
		}
		const bs = 16
		d, err := NewDecoder(benchWeights(m.cfg), gpu.KVCacheSpec{BlockSize: bs, NumBlocks: 16384 / bs})
		if err != nil {
			b.Fatal(err)
		}
		if err := d.fillCacheRandom(9); err != nil {
			b.Fatal(err)
		}
		blocks := make([]int32, 16384/bs)
		for i := range blocks {
			blocks[i] = int32(i)
		}
		for _, sh := range []struct{ start, tokens int }{{0, 4096}, {0, 16384}, {12288, 4096}} {
			b.Run(fmt.Sprintf("%s/start%d/tokens%d", m.name, sh.start, sh.tokens), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(3, uint64(sh.tokens)))
				seq := gpu.ServeSeq{Tokens: randTokens(rng, m.cfg.VocabSize, sh.tokens), Start: sh.start, Blocks: blocks,
					Sample: true, Params: gpu.SampleParams{Temperature: 1, TopP: 1}, Uniform: 0.5}
				if _, err := d.Step([]gpu.ServeSeq{seq}); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					if _, err := d.Step([]gpu.ServeSeq{seq}); err != nil {
						b.Fatal(err)
					}
				}
				el := time.Since(start).Seconds() / float64(b.N)
				b.StopTimer()
				fl := prefillFlops(m.cfg, sh.start+sh.tokens) - prefillFlops(m.cfg, sh.start) +
					2*float64(m.cfg.VocabSize)*float64(m.cfg.HiddenSize) // one head row, cancelled by the difference
				saveServeRecord(b, serveRecord{Name: "go/prefill/" + m.name, Device: info.Name, Batch: 1, Context: sh.start + sh.tokens,
					StepMS: el * 1e3, TokensPerSec: float64(sh.tokens) / el, MFU: fl / el / peakBF16,
					Note: fmt.Sprintf("%d new tokens after %d cached", sh.tokens, sh.start)})
			})
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
