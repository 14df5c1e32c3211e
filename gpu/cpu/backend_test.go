package cpu

import (
	"path/filepath"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// trainOneStep moves the weights off their initialization so a round trip is not trivially
// reproducible from the seed.
func trainOneStep(t *testing.T, b *Backend) {
	t.Helper()
	mb := treeBatch()
	if _, _, err := b.Forward(mb); err != nil {
		t.Fatal(err)
	}
	d := make([]float32, mb.Len())
	for i := range d {
		d[i] = -1
	}
	if err := b.Backward(d); err != nil {
		t.Fatal(err)
	}
	opt := gpu.DefaultOptimizer()
	opt.LR = 1e-2
	if _, err := b.Step(opt); err != nil {
		t.Fatal(err)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		dtype gpu.DType
		tied  bool
	}{{gpu.F32, true}, {gpu.F32, false}, {gpu.BF16, true}, {gpu.BF16, false}} {
		t.Run(string(tc.dtype), func(t *testing.T) {
			cfg := gpu.TinyConfig()
			cfg.TieWordEmbeddings = tc.tied
			b, err := NewRandom(cfg, 11)
			if err != nil {
				t.Fatal(err)
			}
			trainOneStep(t, b)
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := b.Save(dir, tc.dtype); err != nil {
				t.Fatal(err)
			}
			loaded, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := loaded.Config(); got.TorchDtype != string(tc.dtype) || got.TieWordEmbeddings != tc.tied {
				t.Fatalf("loaded config %+v", got)
			}
			// The saved tensors are the trained weights rounded to dtype, bit for bit.
			orig, _ := b.Weights()
			want := orig.Clone()
			if tc.dtype == gpu.BF16 {
				for _, v := range want.Tensors {
					for i := range v {
						v[i] = safetensors.Float32FromBF16(safetensors.BF16FromFloat32(v[i]))
					}
				}
			}
			got, _ := loaded.Weights()
			for name, w := range want.Tensors {
				for i := range w {
					if got.Tensors[name][i] != w[i] {
						t.Fatalf("%s[%d] = %v, want %v", name, i, got.Tensors[name][i], w[i])
					}
				}
			}
			// And a backend built from those weights computes the same log-probs.
			ref, _ := New(want)
			mb := treeBatch()
			lp1, _, _ := loaded.LogProbs(mb)
			lp2, _, _ := ref.LogProbs(mb)
			for i := range lp1 {
				if lp1[i] != lp2[i] {
					t.Fatalf("logp[%d] %v vs %v", i, lp1[i], lp2[i])
				}
			}
		})
	}
}

// BenchmarkTrainStep measures forward+backward tokens/s of the reference on TinyConfig-shaped
// models with a 256-token chain (and reports tokens/s as a metric).
func BenchmarkTrainStep(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  func() gpu.Config
		n    int
	}{
		{"tiny-256", gpu.TinyConfig, 256},
		{"small-256", func() gpu.Config {
			c := gpu.TinyConfig()
			c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 4096, 128, 384, 4
			c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 4, 2, 32
			return c
		}, 256},
	} {
		b.Run(tc.name, func(b *testing.B) {
			be, err := NewRandom(tc.cfg(), 1)
			if err != nil {
				b.Fatal(err)
			}
			toks := make([]int32, tc.n)
			for i := range toks {
				toks[i] = int32(i*7) % int32(tc.cfg().VocabSize)
			}
			mb := gpu.Chain(toks)
			d := make([]float32, tc.n)
			for i := range d {
				d[i] = -1
			}
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := be.Forward(mb); err != nil {
					b.Fatal(err)
				}
				if err := be.Backward(d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tc.n*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
