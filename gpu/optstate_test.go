package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"tau2rl/gpu/safetensors"
)

// fillState returns a tensor source whose values encode (parameter, suffix, index), so a reader
// can tell every tensor apart; second moments are non-negative.
func fillState(cfg Config) func(p ParamSpec, suffix string) ([]float32, error) {
	ids := map[string]int{}
	for i, s := range ParamSpecs(cfg) {
		ids[s.Name] = i
	}
	return func(p ParamSpec, suffix string) ([]float32, error) {
		v := make([]float32, p.Size())
		base := float32(ids[p.Name]*3 + slices.Index(OptimizerStateSuffixes[:], suffix))
		for i := range v {
			v[i] = base + float32(i)*1e-3
		}
		return v, nil
	}
}

// openState opens an optimizer-state file (closed with the test) and checks its header.
func openState(t *testing.T, cfg Config, path string) (*safetensors.File, int) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	step, err := CheckOptimizerStateHeader(cfg, f)
	if err != nil {
		t.Fatalf("header: %v", err)
	}
	return f, step
}

// The shared writer and reader agree: every tensor written comes back with the step, in the
// documented order, and the header check accepts the file.
func TestOptimizerStateRoundTrip(t *testing.T) {
	cfg := TinyConfig()
	path := filepath.Join(t.TempDir(), OptimizerStateFile)
	src := fillState(cfg)
	if err := WriteOptimizerState(path, cfg, 7, src); err != nil {
		t.Fatal(err)
	}
	f, step := openState(t, cfg, path)
	if step != 7 {
		t.Fatalf("header: step %d, want 7", step)
	}
	specs := OptimizerStateSpecs(cfg)
	if len(f.Header.Tensors) != len(specs) {
		t.Fatalf("%d tensors, want %d", len(f.Header.Tensors), len(specs))
	}
	for i, ts := range f.Header.Tensors {
		if ts.Name != specs[i].Name {
			t.Fatalf("tensor %d is %q, want %q (write order)", i, ts.Name, specs[i].Name)
		}
	}
	for _, p := range ParamSpecs(cfg) {
		for _, suf := range OptimizerStateSuffixes {
			got, err := ReadOptimizerStateTensor(f, p, suf, step)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := src(p, suf)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s%s[%d] = %g, want %g", p.Name, suf, i, got[i], want[i])
				}
			}
		}
	}
}

// A failing tensor source or a bad step leaves neither the file nor a temporary behind; a file
// read at step 0 with nonzero moments, or by a model of another config, is refused.
func TestOptimizerStateErrors(t *testing.T) {
	cfg := TinyConfig()
	boom := errors.New("device read failed")
	for _, tc := range []struct {
		name string
		step int
		src  func(ParamSpec, string) ([]float32, error)
		want string
	}{
		{"tensor error", 1, func(ParamSpec, string) ([]float32, error) { return nil, boom }, "device read failed"},
		{"short tensor", 1, func(p ParamSpec, _ string) ([]float32, error) { return make([]float32, p.Size()-1), nil }, ""},
		{"negative step", -1, fillState(cfg), "negative step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := WriteOptimizerState(filepath.Join(dir, OptimizerStateFile), cfg, tc.step, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %d entries behind (first %s)", len(ents), ents[0].Name())
			}
		})
	}

	path := filepath.Join(t.TempDir(), OptimizerStateFile)
	if err := WriteOptimizerState(path, cfg, 0, fillState(cfg)); err != nil {
		t.Fatal(err)
	}
	f, step := openState(t, cfg, path)
	p := ParamSpecs(cfg)[0]
	if _, err := ReadOptimizerStateTensor(f, p, SuffixExpAvg, step); err == nil || !strings.Contains(err.Error(), "at step 0") {
		t.Errorf("nonzero moment at step 0: error %v", err)
	}
	if _, err := ReadOptimizerStateTensor(f, p, SuffixMaster, step); err != nil {
		t.Errorf("master weights at step 0: %v", err)
	}
	other := cfg
	other.NumHiddenLayers++
	extra := slices.IndexFunc(ParamSpecs(other), func(s ParamSpec) bool {
		return strings.Contains(s.Name, ".layers."+strconv.Itoa(cfg.NumHiddenLayers)+".")
	})
	if extra < 0 {
		t.Fatal("no parameter of the extra layer")
	}
	if _, err := ReadOptimizerStateTensor(f, ParamSpecs(other)[extra], SuffixMaster, step); err == nil || !strings.Contains(err.Error(), "missing tensor") {
		t.Errorf("a tensor the file lacks: error %v", err)
	}
	fewer := cfg
	fewer.NumHiddenLayers--
	if _, err := CheckOptimizerStateHeader(fewer, f); err == nil || !strings.Contains(err.Error(), "unexpected tensor") {
		t.Errorf("a smaller model's header check: error %v", err)
	}
}
