package cpu

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// trainStepK runs one optimizer step on treeBatch with a gradient signal that varies with k, so
// consecutive steps move the moments in different directions.
func trainStepK(t testing.TB, b *Backend, k int) {
	t.Helper()
	mb := treeBatch()
	if _, _, err := b.Forward(mb); err != nil {
		t.Fatal(err)
	}
	d := make([]float32, mb.Len())
	for i := range d {
		d[i] = float32((i*7+k*3)%5-2) / 2
	}
	if err := b.Backward(d); err != nil {
		t.Fatal(err)
	}
	opt := gpu.DefaultOptimizer()
	opt.LR = 1e-2
	opt.MaxGradNorm = 0.5 // clipping active: the resumed step must clip identically
	if _, err := b.Step(opt); err != nil {
		t.Fatal(err)
	}
}

func mustWeights(t testing.TB, b *Backend) *gpu.Weights {
	t.Helper()
	w, err := b.Weights()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// diffWeights returns the first tensor element whose bits differ, or "" when a and b are equal
// bit for bit.
func diffWeights(a, b *gpu.Weights) string {
	for _, s := range gpu.ParamSpecs(a.Config) {
		x, y := a.Tensors[s.Name], b.Tensors[s.Name]
		if len(x) != len(y) {
			return s.Name + ": lengths differ"
		}
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return fmt.Sprintf("%s[%d] (%v vs %v)", s.Name, i, x[i], y[i])
			}
		}
	}
	return ""
}

// TestOptimizerStateResumeExact: train k steps, save weights (in the checkpoint dtype) and the
// optimizer state, load both into a fresh backend, then one more step on each gives identical
// weights bit for bit — also when the weights file is bfloat16, thanks to the master weights.
func TestOptimizerStateResumeExact(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dtype gpu.DType
		tied  bool
		k     int
	}{
		{"f32-tied", gpu.F32, true, 3},
		{"bf16-tied", gpu.BF16, true, 3},
		{"bf16-untied", gpu.BF16, false, 2},
		{"f32-untied-step0", gpu.F32, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gpu.TinyConfig()
			cfg.TieWordEmbeddings = tc.tied
			a, err := NewRandom(cfg, 11)
			if err != nil {
				t.Fatal(err)
			}
			for k := range tc.k {
				trainStepK(t, a, k)
			}
			dir := filepath.Join(t.TempDir(), "v3")
			if err := a.Save(dir, tc.dtype); err != nil {
				t.Fatal(err)
			}
			if err := a.SaveOptimizerState(dir); err != nil {
				t.Fatal(err)
			}
			b, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.LoadOptimizerState(dir); err != nil {
				t.Fatal(err)
			}
			if b.step != a.step {
				t.Fatalf("step %d, want %d", b.step, a.step)
			}
			if d := diffWeights(mustWeights(t, a), mustWeights(t, b)); d != "" {
				t.Fatalf("restored master weights differ at %s", d)
			}
			// The control: weights alone (moments from zero) do not reproduce the next step, so
			// the comparison below can fail.
			c, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			trainStepK(t, a, tc.k)
			trainStepK(t, b, tc.k)
			trainStepK(t, c, tc.k)
			if d := diffWeights(mustWeights(t, a), mustWeights(t, b)); d != "" {
				t.Fatalf("after the resumed step, weights differ at %s", d)
			}
			for i := range a.m1 {
				if math.Float32bits(a.m1[i]) != math.Float32bits(b.m1[i]) || math.Float32bits(a.m2[i]) != math.Float32bits(b.m2[i]) {
					t.Fatalf("moments differ at %d", i)
				}
			}
			if tc.k > 0 || tc.dtype != gpu.F32 {
				if diffWeights(mustWeights(t, a), mustWeights(t, c)) == "" {
					t.Fatal("a backend without the optimizer state took the same step: the test cannot tell")
				}
			}
		})
	}
}

// TestOptimizerStateFile pins the file's contents: names, dtypes, shapes and metadata.
func TestOptimizerStateFile(t *testing.T) {
	cfg := gpu.TinyConfig()
	b, err := NewRandom(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	trainStepK(t, b, 0)
	trainStepK(t, b, 1)
	dir := t.TempDir()
	if err := b.SaveOptimizerState(dir); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(dir, gpu.OptimizerStateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.Header.Metadata
	if md["format"] != "tau2rl.adamw" || md["format_version"] != "1" || md["optimizer"] != "adamw" || md["step"] != "2" {
		t.Fatalf("metadata %v", md)
	}
	specs := gpu.ParamSpecs(cfg)
	if len(f.Header.Tensors) != 3*len(specs) {
		t.Fatalf("%d tensors, want %d", len(f.Header.Tensors), 3*len(specs))
	}
	w := mustWeights(t, b)
	m1 := views(cfg, b.m1)
	for _, s := range specs {
		for _, suf := range []string{".master", ".exp_avg", ".exp_avg_sq"} {
			info, ok := f.Header.Lookup(s.Name + suf)
			if !ok || info.DType != safetensors.F32 || len(info.Shape) != len(s.Shape) {
				t.Fatalf("%s%s: %+v %v", s.Name, suf, info, ok)
			}
		}
		master, _, _ := f.Float32(s.Name + ".master")
		avg, _, _ := f.Float32(s.Name + ".exp_avg")
		for i := range master {
			if master[i] != w.Tensors[s.Name][i] || avg[i] != m1.byName[s.Name][i] {
				t.Fatalf("%s[%d]: file holds %v/%v, backend %v/%v", s.Name, i, master[i], avg[i], w.Tensors[s.Name][i], m1.byName[s.Name][i])
			}
		}
	}
	// No temporary file is left next to it.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("dir holds %v", ents)
	}
}

// stFile is a decoded safetensors file that tests edit and re-encode.
type stFile struct {
	specs []safetensors.TensorSpec
	meta  map[string]string
	vals  map[string][]float32
}

func readST(t *testing.T, path string) *stFile {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := &stFile{meta: map[string]string{}, vals: map[string][]float32{}}
	for k, v := range f.Header.Metadata {
		out.meta[k] = v
	}
	for _, ti := range f.Header.Tensors {
		v, _, err := f.Float32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		out.specs = append(out.specs, safetensors.TensorSpec{Name: ti.Name, DType: ti.DType, Shape: ti.Shape})
		out.vals[ti.Name] = v
	}
	return out
}

func (s *stFile) write(t *testing.T, path string) {
	t.Helper()
	var buf bytes.Buffer
	w, err := safetensors.NewWriter(&buf, s.specs, s.meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range s.specs {
		if err := w.WriteFloat32(sp.Name, s.vals[sp.Name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *stFile) drop(name string) {
	for i, sp := range s.specs {
		if sp.Name == name {
			s.specs = append(s.specs[:i], s.specs[i+1:]...)
			return
		}
	}
}

func (s *stFile) setDType(name string, d safetensors.DType) {
	for i := range s.specs {
		if s.specs[i].Name == name {
			s.specs[i].DType = d
		}
	}
}

// TestOptimizerStateErrors: every corrupt, missing or mismatched file is a clear error and leaves
// the backend exactly as it was.
func TestOptimizerStateErrors(t *testing.T) {
	cfg := gpu.TinyConfig()
	src, err := NewRandom(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	trainStepK(t, src, 0)
	good := t.TempDir()
	if err := src.SaveOptimizerState(good); err != nil {
		t.Fatal(err)
	}
	goodPath := filepath.Join(good, gpu.OptimizerStateFile)
	raw, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	const emb = gpu.NameEmbed
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string) // writes the file at path; nil: no file
		want string
	}{
		{"missing", nil, "no such file"},
		{"empty", func(t *testing.T, p string) { os.WriteFile(p, nil, 0o644) }, "header length"},
		{"truncated", func(t *testing.T, p string) { os.WriteFile(p, raw[:len(raw)-9], 0o644) }, "data buffer"},
		{"not safetensors", func(t *testing.T, p string) { os.WriteFile(p, []byte("{\"step\": 3}\n...."), 0o644) }, "header length"},
		{"format", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta["format"] = "pt"; f.write(t, p) }, "metadata format"},
		{"no metadata", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta = nil; f.write(t, p) }, "metadata format"},
		{"version", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta["format_version"] = "2"; f.write(t, p) }, "format_version"},
		{"optimizer", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta["optimizer"] = "sgd"; f.write(t, p) }, "optimizer"},
		{"step negative", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta["step"] = "-1"; f.write(t, p) }, "step"},
		{"step text", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta["step"] = "one"; f.write(t, p) }, "step"},
		{"step padded", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta["step"] = "01"; f.write(t, p) }, "step"},
		{"step zero with moments", func(t *testing.T, p string) { f := readST(t, goodPath); f.meta["step"] = "0"; f.write(t, p) }, "step 0"},
		{"missing tensor", func(t *testing.T, p string) { f := readST(t, goodPath); f.drop(emb + ".exp_avg_sq"); f.write(t, p) }, "missing tensor"},
		{"bf16 tensor", func(t *testing.T, p string) {
			f := readST(t, goodPath)
			f.setDType(emb+".exp_avg", safetensors.BF16)
			f.write(t, p)
		}, "want F32"},
		{"nan", func(t *testing.T, p string) {
			f := readST(t, goodPath)
			f.vals[emb+".master"][7] = float32(math.NaN())
			f.write(t, p)
		}, "not finite"},
		{"negative second moment", func(t *testing.T, p string) {
			f := readST(t, goodPath)
			f.vals[gpu.NameNorm+".exp_avg_sq"][0] = -1e-9
			f.write(t, p)
		}, "negative"},
		{"extra tensor", func(t *testing.T, p string) {
			f := readST(t, goodPath)
			f.specs = append(f.specs, safetensors.TensorSpec{Name: "lm_head.weight.exp_avg", DType: safetensors.F32, Shape: []int{1}})
			f.vals["lm_head.weight.exp_avg"] = []float32{0}
			f.write(t, p)
		}, "unexpected tensor"},
		{"untied model's state", func(t *testing.T, p string) { saveFor(t, p, func(c *gpu.Config) { c.TieWordEmbeddings = false }) }, "unexpected tensor"},
		{"fewer layers", func(t *testing.T, p string) { saveFor(t, p, func(c *gpu.Config) { c.NumHiddenLayers = 1 }) }, "missing tensor"},
		{"narrower mlp", func(t *testing.T, p string) { saveFor(t, p, func(c *gpu.Config) { c.IntermediateSize = 40 }) }, "shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.make != nil {
				tc.make(t, filepath.Join(dir, gpu.OptimizerStateFile))
			}
			b, err := NewRandom(cfg, 9)
			if err != nil {
				t.Fatal(err)
			}
			trainStepK(t, b, 4)
			before := mustWeights(t, b)
			m1, m2, step := append([]float32(nil), b.m1...), append([]float32(nil), b.m2...), b.step
			err = b.LoadOptimizerState(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "optimizer state") {
				t.Fatalf("err %v does not say what was being loaded", err)
			}
			if d := diffWeights(before, mustWeights(t, b)); d != "" || b.step != step ||
				!bytes.Equal(f32bytes(m1), f32bytes(b.m1)) || !bytes.Equal(f32bytes(m2), f32bytes(b.m2)) {
				t.Fatalf("a failed load changed the backend (weights diff %q, step %d→%d)", d, step, b.step)
			}
		})
	}
	closed, _ := NewRandom(cfg, 1)
	closed.Close()
	if err := closed.SaveOptimizerState(t.TempDir()); err == nil {
		t.Error("closed backend saved")
	}
	if err := closed.LoadOptimizerState(good); err == nil {
		t.Error("closed backend loaded")
	}
}

// saveFor writes the optimizer state of a model with an edited TinyConfig to path.
func saveFor(t *testing.T, path string, edit func(*gpu.Config)) {
	t.Helper()
	c := gpu.TinyConfig()
	edit(&c)
	b, err := NewRandom(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	trainStepK(t, b, 0)
	if err := b.SaveOptimizerState(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
}

func f32bytes(v []float32) []byte {
	out := make([]byte, 0, 4*len(v))
	for _, x := range v {
		u := math.Float32bits(x)
		out = append(out, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return out
}

// FuzzReadOptState: the optimizer-state file is read back from disk after a crash; no input may
// panic, and an accepted one must be complete and finite.
func FuzzReadOptState(f *testing.F) {
	cfg := gpu.TinyConfig()
	// As small as a valid model gets, so the fuzzer's input minimization stays quick.
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 8, 4, 2, 1
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 1, 1, 2
	b, err := NewRandom(cfg, 1)
	if err != nil {
		f.Fatal(err)
	}
	seed := func() []byte {
		dir := f.TempDir()
		if err := b.SaveOptimizerState(dir); err != nil {
			f.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, gpu.OptimizerStateFile))
		if err != nil {
			f.Fatal(err)
		}
		return raw
	}
	f.Add(seed())
	mb := gpu.Chain([]int32{1, 5, 7, 3})
	if _, _, err := b.Forward(mb); err != nil {
		f.Fatal(err)
	}
	if err := b.Backward([]float32{0, -1, 1, -1}); err != nil {
		f.Fatal(err)
	}
	if _, err := b.Step(gpu.DefaultOptimizer()); err != nil {
		f.Fatal(err)
	}
	trained := seed()
	f.Add(trained)
	f.Add(trained[:len(trained)/2])
	f.Add([]byte{})
	_, n := layout(cfg)
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := readOptState(cfg, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if len(st.params) != n || len(st.m1) != n || len(st.m2) != n || st.step < 0 {
			t.Fatalf("accepted incomplete state: %d/%d/%d of %d, step %d", len(st.params), len(st.m1), len(st.m2), n, st.step)
		}
		for i := range st.m2 {
			if st.m2[i] < 0 || math.IsNaN(float64(st.params[i])) || math.IsInf(float64(st.m1[i]), 0) {
				t.Fatalf("accepted invalid values at %d", i)
			}
		}
	})
}

// BenchmarkOptimizerState measures writing (with fsync) and reading back the optimizer state of
// a 1.3M-parameter model (15.8 MB file), reported as MB/s of file.
func BenchmarkOptimizerState(b *testing.B) {
	c := gpu.TinyConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 4096, 128, 384, 4
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 4, 2, 32
	be, err := NewRandom(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, gpu.OptimizerStateFile))
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			if err := be.SaveOptimizerState(dir); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(size())
	})
	b.Run("load", func(b *testing.B) {
		if err := be.SaveOptimizerState(dir); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size())
		for b.Loop() {
			if err := be.LoadOptimizerState(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}
