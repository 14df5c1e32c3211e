//go:build cuda

package cuda

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/sampler"
	"tau2rl/gpu/sampler/httpapi"
	"tau2rl/gpu/sampler/loadgen"
)

// serveLoads parses T2_SERVE_LOADS ("GxSxT,…": groups × samples × turns; default the issue's
// 8×8×6) into shapes of the τ² load (5,000-token system prefix, 300-token task prefix,
// ~150 generated + 200 appended tokens per call).
func serveLoads(b *testing.B) []loadgen.Shape {
	spec := os.Getenv("T2_SERVE_LOADS")
	if spec == "" {
		spec = "8x8x6"
	}
	var out []loadgen.Shape
	for _, f := range strings.Split(spec, ",") {
		p := strings.Split(f, "x")
		if len(p) != 3 {
			b.Fatalf("T2_SERVE_LOADS %q: want GxSxT", f)
		}
		s := loadgen.Tau2Shape()
		var err error
		for i, dst := range []*int{&s.Groups, &s.Samples, &s.Turns} {
			if *dst, err = strconv.Atoi(p[i]); err != nil {
				b.Fatalf("T2_SERVE_LOADS %q: %v", f, err)
			}
		}
		out = append(out, s)
	}
	return out
}

// BenchmarkServeTau2 runs the τ²-shaped serving load (gpu/sampler/loadgen) against the real
// engine and HTTP layer on loopback with the CUDA decoder (random Qwen3 weights), as a user
// measures tau2-sampler from outside, and prints the load's floors beside the measurement (the
// card's copy bandwidth and matmul rate are measured first). T2_BENCH_SHAPES narrows the models
// ("0.6B", "1.7B"), T2_SERVE_LOADS the loads; T2_SERVE_CAPTURE_AFTER sets the decoder's graph
// capture policy (0: every new step shape, the behaviour before issue 28) and T2_SERVE_MMA=0,1
// runs the CUDA-core paged path (before issue 28) beside the tensor-core one, and
// T2_SERVE_OWN_MMA=0,1 the decode tokens' own blocks on either kernel, for A/B runs;
// T2_SERVE_SPLIT=4,8,… runs each load at each paged-kernel split target (items per SM, the
// decoder's itemsPerSM; default defaultItemsPerSM); T2_SERVE_PROFILE=1 adds a shorter run with the per-operation profiler. Records go to
// $T2_REPORT_DIR/serve_tau2.jsonl (loadgen.Record plus the engine's step counts).
func BenchmarkServeTau2(b *testing.B) {
	info, err := Device(0)
	if err != nil {
		b.Skip(err)
	}
	bw, err := copyBandwidth()
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct {
		name string
		cfg  gpu.Config
	}{{"1.7B", gpu.Qwen3_1_7B()}, {"0.6B", gpu.Qwen3_0_6B()}} {
		if sel := os.Getenv("T2_BENCH_SHAPES"); sel != "" && !strings.Contains(","+sel+",", ","+m.name+",") {
			continue
		}
		b.Run(m.name, func(b *testing.B) {
			const bs = 16
			nb, err := KVBlocksForMemory(m.cfg, bs, 0.85)
			if err != nil {
				b.Fatal(err)
			}
			d, err := NewDecoder(benchWeights(m.cfg), gpu.KVCacheSpec{BlockSize: bs, NumBlocks: nb})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			peak, err := d.matmulPeak()
			if err != nil {
				b.Fatal(err)
			}
			hw := loadgen.Hardware{CopyBytesPerS: bw, MatmulFLOPs: peak}
			b.Logf("%s: copy %.0f GB/s, matmul %.0f TFLOP/s, KV pool %d blocks × %d", info.Name, bw/1e9, peak/1e12, nb, bs)
			policies := []int{defaultCaptureAfter}
			if v := os.Getenv("T2_SERVE_CAPTURE_AFTER"); v != "" {
				policies = nil
				for _, f := range strings.Split(v, ",") {
					n, err := strconv.Atoi(f)
					if err != nil {
						b.Fatal(err)
					}
					policies = append(policies, n)
				}
			}
			owns := []bool{true}
			if os.Getenv("T2_SERVE_OWN_MMA") == "0,1" {
				owns = []bool{false, true}
			} else if os.Getenv("T2_SERVE_OWN_MMA") == "0" {
				owns = []bool{false}
			}
			splits := []int{defaultItemsPerSM}
			if v := os.Getenv("T2_SERVE_SPLIT"); v != "" {
				splits = nil
				for _, f := range strings.Split(v, ",") {
					n, err := strconv.Atoi(f)
					if err != nil || n < 1 {
						b.Fatalf("T2_SERVE_SPLIT %q: want items per SM ≥ 1, comma-separated", v)
					}
					splits = append(splits, n)
				}
			}
			mmas := []bool{true}
			if os.Getenv("T2_SERVE_MMA") == "0,1" {
				mmas = []bool{false, true}
			} else if os.Getenv("T2_SERVE_MMA") == "0" {
				mmas = []bool{false}
			}
			for _, s := range serveLoads(b) {
				for _, mma := range mmas {
					for _, own := range owns {
						if !mma && own != owns[0] {
							continue // the CUDA-core path has no own-blocks choice: run it once
						}
						for _, pol := range policies {
							for _, sp := range splits {
								d.captureAfter, d.noMMA, d.ownMMA, d.itemsPerSM = pol, !mma, own, sp
								runServeLoad(b, d, m.name, info.Name, s, hw,
									fmt.Sprintf("capture_after=%d tensor_core_paged=%v own_blocks_tensor_core=%v items_per_sm=%d", pol, mma, own, sp))
							}
						}
					}
				}
			}
			d.noMMA, d.ownMMA, d.itemsPerSM = false, true, defaultItemsPerSM
			if os.Getenv("T2_SERVE_PROFILE") == "1" {
				s := serveLoads(b)[0]
				s.Turns = 2
				if err := d.setProfiling(true); err != nil {
					b.Fatal(err)
				}
				runServeLoad(b, d, m.name, info.Name, s, hw, "profiled (eager launches, events around each)")
				var sb strings.Builder
				var total float64
				ops := d.prof.sorted()
				for _, o := range ops {
					total += o.MS
				}
				fmt.Fprintf(&sb, "serve %s %dx%dx%d: %.1f ms of device time in %d steps\n", m.name, s.Groups, s.Samples, s.Turns, total, d.st.Steps)
				agg := map[string]float64{}
				for _, o := range ops {
					op := o.Op
					if i := strings.Index(op, "layer "); i == 0 {
						if j := strings.Index(op[6:], " "); j >= 0 {
							op = op[6+j+1:]
						}
					}
					agg[op] += o.MS
				}
				for op, ms := range agg {
					fmt.Fprintf(&sb, "  %-28s %10.1f ms %5.1f%%\n", op, ms, 100*ms/total)
				}
				b.Log(sb.String())
				writeReport(b, "profile-serve-"+m.name, sb.String())
				if err := d.setProfiling(false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// runServeLoad serves one load on a fresh engine over d (a cold prefix cache, as a restarted
// server) and records it.
func runServeLoad(b *testing.B, d *Decoder, model, card string, s loadgen.Shape, hw loadgen.Hardware, note string) {
	eng, err := sampler.New(d, sampler.Config{}, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	srv := httptest.NewServer(httpapi.New(eng, httpapi.Options{ModelName: model}).Handler())
	defer func() { srv.Close(); eng.Close(); <-eng.Done() }()
	d.st = decoderStats{}
	client := &loadgen.SGLang{BaseURL: srv.URL, BlockSize: d.kv.BlockSize,
		HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r, err := loadgen.Run(ctx, client, s)
	if err != nil {
		b.Fatal(err)
	}
	st := eng.Stats()
	f := loadgen.Floors(d.cfg, r, hw)
	ds := d.st
	b.Logf("%s %s (%s):\n%sengine: %d steps, %.1f tokens/step, decoder %.1f%% of the wall (%.2f ms/step: plan %.3f, graph capture %.2f s over %d captures, %d replays, %d eager)",
		model, card, note, loadgen.Summary(r, f, hw), st.Steps, float64(r.OutputTokens)/float64(max(1, st.Steps)),
		100*st.DecoderTime.Seconds()/r.Wall.Seconds(), 1e3*ds.StepSec/float64(max(1, ds.Steps)), 1e3*ds.PlanSec/float64(max(1, ds.Steps)),
		ds.CaptureSec, ds.Captures, ds.Replays, ds.Eager)
	rec := loadgen.NewRecord(model, card, os.Getenv("T2_COMMIT"), r, f, hw)
	rec.Server, rec.Note = "tau2-sampler backend=cuda (BenchmarkServeTau2)", note
	type full struct {
		loadgen.Record
		Steps        int     `json:"engine_steps"`
		DecoderShare float64 `json:"decoder_share_of_wall"`
		StepMS       float64 `json:"decoder_step_ms"`
		Captures     int     `json:"graph_captures"`
		CaptureS     float64 `json:"graph_capture_s"`
		Eager        int     `json:"eager_steps"`
	}
	line, _ := json.Marshal(full{rec, st.Steps, st.DecoderTime.Seconds() / r.Wall.Seconds(), 1e3 * ds.StepSec / float64(max(1, ds.Steps)),
		ds.Captures, ds.CaptureSec, ds.Eager})
	if dir := os.Getenv("T2_REPORT_DIR"); dir != "" {
		fh, err := os.OpenFile(filepath.Join(dir, "serve_tau2.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(fh, "%s\n", line)
			fh.Close()
		}
	}
}
