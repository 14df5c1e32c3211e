package checkpoint

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

// writeModelAndOptimizer writes a tiny model's weights and its (fresh) optimizer state.
func writeModelAndOptimizer(dir string) error {
	b, err := cpu.NewRandom(gpu.TinyConfig(), 7)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Save(dir, gpu.F32); err != nil {
		return err
	}
	return b.SaveOptimizerState(dir)
}

// weightsOnly hides every optional interface of a backend, as a backend without optimizer-state
// support (today's CUDA backend) looks to the checkpoint code.
type weightsOnly struct{ gpu.Backend }

// failingSaver is a backend whose optimizer state cannot be written.
type failingSaver struct{ *cpu.Backend }

func (failingSaver) SaveOptimizerState(string) error { return errors.New("device lost") }

func trainedBackend(t *testing.T) *cpu.Backend {
	t.Helper()
	b, err := cpu.NewRandom(gpu.TinyConfig(), 21)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		mb := gpu.Chain([]int32{3, 9, 4, 17, 5, 30})
		if _, _, err := b.Forward(mb); err != nil {
			t.Fatal(err)
		}
		d := []float32{0, -1, 0.5, -1, 1, float32(k) - 0.5}
		if err := b.Backward(d); err != nil {
			t.Fatal(err)
		}
		opt := gpu.DefaultOptimizer()
		opt.LR = 1e-2
		if _, err := b.Step(opt); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func sameBits(t *testing.T, a, b gpu.Backend) {
	t.Helper()
	wa, err := a.(gpu.WeightExporter).Weights()
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.(gpu.WeightExporter).Weights()
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range wa.Tensors {
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(wb.Tensors[name][i]) {
				t.Fatalf("%s[%d]: %v vs %v", name, i, x[i], wb.Tensors[name][i])
			}
		}
	}
}

// TestSaveBackendWithOptimizer: the optimizer state is published with the weights, the state
// file says so, and LoadOptimizer restores the exact master weights over the bf16 ones.
func TestSaveBackendWithOptimizer(t *testing.T) {
	var log bytes.Buffer
	m := &Manager{Dir: t.TempDir(), Keep: 2, Log: logTo(&log)}
	be := trainedBackend(t)
	dir, err := m.SaveBackend(State{Version: 2, Step: 2}, be, gpu.BF16)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", gpu.OptimizerStateFile, StateFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("checkpoint lacks %s: %v", f, err)
		}
	}
	_, st, ok, _, err := m.Latest()
	if err != nil || !ok || st.Optimizer != OptimizerSaved || st.OptimizerNote != "" {
		t.Fatalf("state %+v ok %v err %v", st, ok, err)
	}
	loaded, err := cpu.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := m.LoadOptimizer(dir, st, loaded)
	if err != nil || !restored {
		t.Fatalf("restored %v err %v", restored, err)
	}
	sameBits(t, be, loaded)
	if log.Len() != 0 {
		t.Fatalf("unexpected warnings: %s", log.String())
	}

	// The state promises an optimizer file: losing it is an error, not a silent restart.
	os.Remove(filepath.Join(dir, gpu.OptimizerStateFile))
	if _, err := m.LoadOptimizer(dir, st, loaded); err == nil || !strings.Contains(err.Error(), "records optimizer state") {
		t.Fatalf("missing optimizer file: err %v", err)
	}
	// A corrupt one too.
	os.WriteFile(filepath.Join(dir, gpu.OptimizerStateFile), []byte("garbage!garbage!"), 0o644)
	if _, err := m.LoadOptimizer(dir, st, loaded); err == nil {
		t.Fatal("corrupt optimizer file loaded")
	}
}

// TestSaveBackendWithoutOptimizer: a backend without gpu.OptimizerStateSaver still checkpoints;
// the state file says the optimizer state is missing and why, the warning is logged once, and a
// resume warns and goes on.
func TestSaveBackendWithoutOptimizer(t *testing.T) {
	var log bytes.Buffer
	m := &Manager{Dir: t.TempDir(), Keep: 3, Log: logTo(&log)}
	be := weightsOnly{trainedBackend(t)}
	for v := int64(1); v <= 2; v++ {
		if _, err := m.SaveBackend(State{Version: v, Step: v}, be, gpu.F32); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(log.String(), "will not hold the optimizer state"); n != 1 {
		t.Fatalf("warning logged %d times, want once:\n%s", n, log.String())
	}
	dir, st, ok, _, err := m.Latest()
	if err != nil || !ok || st.Optimizer != OptimizerNotSaved || !strings.Contains(st.OptimizerNote, "OptimizerStateSaver") {
		t.Fatalf("state %+v ok %v err %v", st, ok, err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, StateFile))
	if !strings.Contains(string(raw), `"optimizer": "not_saved"`) {
		t.Fatalf("state file does not say the optimizer state is missing:\n%s", raw)
	}
	if _, err := os.Stat(filepath.Join(dir, gpu.OptimizerStateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("optimizer file present: %v", err)
	}
	log.Reset()
	restored, err := m.LoadOptimizer(dir, st, trainedBackend(t))
	if err != nil || restored || !strings.Contains(log.String(), "restart from zero") {
		t.Fatalf("restored %v err %v log %q", restored, err, log.String())
	}

	// A checkpoint with optimizer state, resumed on a backend that cannot load it: warning.
	m2 := &Manager{Dir: t.TempDir(), Keep: 1, Log: logTo(&log)}
	dir2, err := m2.SaveBackend(State{Version: 1}, trainedBackend(t), gpu.F32)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := ReadState(dir2)
	if err != nil {
		t.Fatal(err)
	}
	log.Reset()
	restored, err = m2.LoadOptimizer(dir2, st2, be)
	if err != nil || restored || !strings.Contains(log.String(), "cannot load optimizer state") {
		t.Fatalf("restored %v err %v log %q", restored, err, log.String())
	}
}

// TestSaveBackendOptimizerFailure: a failed optimizer-state write publishes nothing.
func TestSaveBackendOptimizerFailure(t *testing.T) {
	m := &Manager{Dir: t.TempDir(), Keep: 2}
	_, err := m.SaveBackend(State{Version: 1}, failingSaver{trainedBackend(t)}, gpu.F32)
	if err == nil || !strings.Contains(err.Error(), "device lost") || !strings.Contains(err.Error(), "optimizer state") {
		t.Fatalf("err %v", err)
	}
	if ents, _ := os.ReadDir(m.Dir); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
	// A writer that claims the optimizer state but does not write it is caught before publishing.
	_, err = m.Save(State{Version: 1, Optimizer: OptimizerSaved}, writeModel)
	if err == nil || !strings.Contains(err.Error(), gpu.OptimizerStateFile) {
		t.Fatalf("err %v", err)
	}
	_, err = m.Save(State{Version: 1, Optimizer: "maybe"}, writeModel)
	if err == nil {
		t.Fatal("unknown optimizer value saved")
	}
	if ents, _ := os.ReadDir(m.Dir); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}
