// Package checkpoint writes and finds the trainer's checkpoints: a Hugging Face model directory
// (what inference servers load), the optimizer state (what an exact resume needs) and a small
// JSON state file, published atomically.
//
// Layout under Dir:
//
//	v<N>/                   the checkpoint of policy version N
//	    config.json         written by the backend (gpu.Backend.Save)
//	    model.safetensors
//	    optimizer.safetensors  AdamW moments, step count and fp32 master weights
//	                        (gpu.OptimizerStateSaver), when the backend can save them; a
//	                        data-parallel backend (gpu/dp) writes one file per rank instead,
//	                        optimizer-rank-<r>-of-<N>.safetensors
//	    trainer_state.json  State: version, step, whether the optimizer state is there, commit
//	                        targets, trained ids above them, admission
//	.tmp-v<N>-<pid>/        a checkpoint being written; never read, removed at start
//
// A checkpoint is written into a temporary directory, every file is fsynced, and only then is
// the directory renamed to v<N> (and the parent fsynced). A crash therefore leaves either the
// complete v<N> or nothing, and Latest never sees a half-written model. Offsets are committed
// after the rename, so a checkpoint always covers the data committed before it.
//
// A resumed trainer loads the weights and then the optimizer state (LoadOptimizer), so its next
// step is bit for bit the step an uninterrupted run would have taken (the master weights in
// optimizer.safetensors replace the bfloat16-rounded ones of model.safetensors). A backend that
// does not implement gpu.OptimizerStateSaver gets a warning and a state file saying
// "optimizer": "not_saved", and a resume from such a checkpoint restarts AdamW from zero.
//
// trainer_state.json format history (ParseState reads both):
//
//	1  the original format, without optimizer state (read as "optimizer": "not_saved")
//	2  adds "optimizer" ("saved" or "not_saved") and "optimizer_note" (why not saved)
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/dp"
	"tau2rl/lib/durable"
	"tau2rl/lib/logs"
	"tau2rl/trainer/offsets"
)

// StateFile is the name of the JSON state file inside a checkpoint directory.
const StateFile = "trainer_state.json"

// FormatVersion is the State format written; ParseState also reads format 1 (see the package
// doc), and rejects any other.
const FormatVersion = 2

// Values of State.Optimizer.
const (
	// OptimizerSaved: the checkpoint holds gpu.OptimizerStateFile; a resume must load it.
	OptimizerSaved = "saved"
	// OptimizerNotSaved: the checkpoint has weights only (OptimizerNote says why); a resume
	// restarts AdamW moments and bias correction from zero.
	OptimizerNotSaved = "not_saved"
)

// State is what a restarted trainer needs besides the weights.
type State struct {
	Format  int       `json:"format"`
	Version int64     `json:"version"` // policy version = optimizer steps taken
	Step    int64     `json:"step"`
	Time    time.Time `json:"time"`
	// Optimizer says whether the checkpoint holds the optimizer state (OptimizerSaved or
	// OptimizerNotSaved). Save fills an empty value with OptimizerNotSaved.
	Optimizer string `json:"optimizer"`
	// OptimizerNote explains a missing optimizer state to the operator reading the file.
	OptimizerNote string `json:"optimizer_note,omitempty"`
	// Offsets are the commit targets at this checkpoint: messages below them are done.
	Offsets []offsets.Target `json:"offsets"`
	// TrainedAbove are trajectory ids trained at offsets at or above the targets (they will be
	// redelivered after a restart and must be skipped).
	TrainedAbove []string `json:"trained_above,omitempty"`
	// Admission is the admission controller's state (opaque here).
	Admission json.RawMessage `json:"admission,omitempty"`
	// Metrics are a few numbers for operators (loss, reward, tokens), not used on resume.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// Manager writes and finds checkpoints under Dir.
type Manager struct {
	// Dir is the checkpoint root.
	Dir string
	// Keep is how many most recent checkpoints to keep (≥ 1); older ones are deleted after a
	// successful save. Inference servers may still be loading the previous one, so keep ≥ 2.
	Keep int
	// Log receives the warnings about optimizer state that cannot be saved or restored; nil
	// discards them.
	Log *slog.Logger

	warnedNoSaver bool
}

func (m *Manager) logger() *slog.Logger { return logs.OrDiscard(m.Log) }

// Path returns the directory of version v.
func (m *Manager) Path(v int64) string { return filepath.Join(m.Dir, "v"+strconv.FormatInt(v, 10)) }

// SaveBackend writes checkpoint st.Version from a backend: its weights in dtype and, when it
// implements gpu.OptimizerStateSaver, its optimizer state, inside the same atomic publish as the
// state file, which records whether the optimizer state is there. A backend without the
// interface is warned about once per Manager (every state file says so).
func (m *Manager) SaveBackend(st State, be gpu.Backend, dtype gpu.DType) (string, error) {
	saver, ok := be.(gpu.OptimizerStateSaver)
	if ok {
		st.Optimizer, st.OptimizerNote = OptimizerSaved, ""
	} else {
		st.Optimizer = OptimizerNotSaved
		st.OptimizerNote = fmt.Sprintf("backend %T does not implement gpu.OptimizerStateSaver: "+
			"a resume from this checkpoint restarts AdamW moments and bias correction from zero", be)
		if !m.warnedNoSaver {
			m.warnedNoSaver = true
			m.logger().Warn("checkpoints will not hold the optimizer state: a resumed trainer restarts AdamW from zero",
				"backend", fmt.Sprintf("%T", be))
		}
	}
	return m.Save(st, func(dir string) error {
		if err := be.Save(dir, dtype); err != nil {
			return err
		}
		if ok {
			if err := saver.SaveOptimizerState(dir); err != nil {
				return fmt.Errorf("optimizer state: %w", err)
			}
		}
		return nil
	})
}

// LoadOptimizer restores the optimizer state of checkpoint dir (whose state is st) into be, which
// must already hold dir's weights; it reports whether it did. A checkpoint without optimizer
// state, or a backend that cannot load one, is a warning (AdamW restarts from zero); a state file
// that promises optimizer state the directory does not hold intact is an error, because
// resuming silently with a different optimizer is what the file exists to prevent.
func (m *Manager) LoadOptimizer(dir string, st State, be gpu.Backend) (bool, error) {
	if st.Optimizer != OptimizerSaved {
		m.logger().Warn("checkpoint holds no optimizer state: AdamW moments and bias correction restart from zero",
			"checkpoint", dir, "format", st.Format, "note", st.OptimizerNote)
		return false, nil
	}
	saver, ok := be.(gpu.OptimizerStateSaver)
	if !ok {
		m.logger().Warn("backend cannot load optimizer state: AdamW moments and bias correction restart from zero",
			"checkpoint", dir, "backend", fmt.Sprintf("%T", be))
		return false, nil
	}
	if err := saver.LoadOptimizerState(dir); err != nil {
		if _, isGroup := be.(*dp.Group); !isGroup {
			if sharded, _ := dp.HasShards(dir); sharded {
				return false, fmt.Errorf("checkpoint: %s holds optimizer state sharded by a data-parallel trainer "+
					"(optimizer-rank-*.safetensors); resume it with parallel.devices set (any number of GPUs, one included): %w", dir, err)
			}
		}
		return false, fmt.Errorf("checkpoint: %s records optimizer state, but it cannot be restored: %w", dir, err)
	}
	return true, nil
}

// Save writes checkpoint st.Version: write(dir) must write the model files into dir (the
// backend's Save, and gpu.OptimizerStateFile when st.Optimizer is OptimizerSaved), then the state
// file is added and the directory published atomically. It returns the absolute path of the
// checkpoint.
func (m *Manager) Save(st State, write func(dir string) error) (string, error) {
	if m.Keep < 1 {
		return "", fmt.Errorf("checkpoint: keep must be ≥ 1, got %d", m.Keep)
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	final, err := filepath.Abs(m.Path(st.Version))
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	tmp := filepath.Join(m.Dir, fmt.Sprintf(".tmp-v%d-%d", st.Version, os.Getpid()))
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("checkpoint: clear %s: %w", tmp, err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := write(tmp); err != nil {
		return fail(fmt.Errorf("checkpoint: save model v%d: %w", st.Version, err))
	}
	st.Format = FormatVersion
	switch st.Optimizer {
	case "":
		st.Optimizer = OptimizerNotSaved
	case OptimizerNotSaved:
	case OptimizerSaved:
		// The unsharded file, or a data-parallel backend's complete set of per-rank shards.
		if fi, err := os.Stat(filepath.Join(tmp, gpu.OptimizerStateFile)); err != nil || !fi.Mode().IsRegular() {
			if ok, serr := dp.HasShards(tmp); !ok {
				return fail(fmt.Errorf("checkpoint: v%d: state says optimizer %q but the model writer left no %s nor optimizer shards (%v)",
					st.Version, OptimizerSaved, gpu.OptimizerStateFile, serr))
			}
		}
	default:
		return fail(fmt.Errorf("checkpoint: v%d: optimizer %q, want %q or %q", st.Version, st.Optimizer, OptimizerSaved, OptimizerNotSaved))
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fail(fmt.Errorf("checkpoint: encode state: %w", err))
	}
	if err := os.WriteFile(filepath.Join(tmp, StateFile), b, 0o644); err != nil {
		return fail(fmt.Errorf("checkpoint: %w", err))
	}
	if err := syncTree(tmp); err != nil {
		return fail(err)
	}
	// A directory of the same version exists only when an earlier run wrote it but its state
	// could not be used (Latest skipped it); replace it.
	if err := os.RemoveAll(final); err != nil {
		return fail(fmt.Errorf("checkpoint: replace %s: %w", final, err))
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(fmt.Errorf("checkpoint: publish v%d: %w", st.Version, err))
	}
	if err := syncDir(m.Dir); err != nil {
		return "", err
	}
	return final, m.prune()
}

// syncTree fsyncs every regular file in dir and dir itself.
func syncTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("checkpoint: fsync %s: %w", e.Name(), err)
		}
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// versions lists the v<N> directories under Dir, newest first.
func (m *Manager) versions() ([]int64, error) {
	ents, err := os.ReadDir(m.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var vs []int64
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "v") {
			continue
		}
		v, err := strconv.ParseInt(name[1:], 10, 64)
		if err != nil || v < 0 || "v"+strconv.FormatInt(v, 10) != name {
			continue
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	slices.Reverse(vs)
	return vs, nil
}

// prune deletes all but the newest Keep checkpoints and any leftover temporary directories.
func (m *Manager) prune() error {
	vs, err := m.versions()
	if err != nil {
		return err
	}
	for i, v := range vs {
		if i >= m.Keep {
			if err := os.RemoveAll(m.Path(v)); err != nil {
				return fmt.Errorf("checkpoint: prune v%d: %w", v, err)
			}
		}
	}
	return nil
}

// CleanTemp removes temporary directories left by a crash during Save.
func (m *Manager) CleanTemp() error {
	ents, err := os.ReadDir(m.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), ".tmp-v") {
			if err := os.RemoveAll(filepath.Join(m.Dir, e.Name())); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
		}
	}
	return nil
}

// ReadState reads and checks the state file of a checkpoint directory.
func ReadState(dir string) (State, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: %w", err)
	}
	return ParseState(b)
}

// ParseState decodes a state file strictly: unknown fields are errors, the format must be
// FormatVersion or 1 (read as OptimizerNotSaved), the optimizer field one of its two values, and
// versions and offsets must be non-negative.
func ParseState(b []byte) (State, error) {
	var st State
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return State{}, fmt.Errorf("checkpoint: state: %w", err)
	}
	if dec.More() {
		return State{}, fmt.Errorf("checkpoint: state: trailing data")
	}
	switch st.Format {
	case 1:
		if st.Optimizer != "" || st.OptimizerNote != "" {
			return State{}, fmt.Errorf("checkpoint: state format 1 has no optimizer fields")
		}
		st.Optimizer = OptimizerNotSaved
		st.OptimizerNote = "format 1 checkpoint, written before optimizer state was saved"
	case FormatVersion:
		if st.Optimizer != OptimizerSaved && st.Optimizer != OptimizerNotSaved {
			return State{}, fmt.Errorf("checkpoint: state optimizer %q, want %q or %q", st.Optimizer, OptimizerSaved, OptimizerNotSaved)
		}
	default:
		return State{}, fmt.Errorf("checkpoint: state format %d, this trainer reads 1 and %d", st.Format, FormatVersion)
	}
	if st.Version < 0 || st.Step < 0 {
		return State{}, fmt.Errorf("checkpoint: state: negative version %d or step %d", st.Version, st.Step)
	}
	for _, o := range st.Offsets {
		if o.Topic == "" || o.Partition < 0 || o.Next < 0 {
			return State{}, fmt.Errorf("checkpoint: state: bad offset %+v", o)
		}
	}
	return st, nil
}

// Latest returns the newest checkpoint whose state file is valid and whose version matches its
// directory name. ok is false when there is none. Checkpoints with unreadable state are skipped
// (and reported through skipped) rather than fatal, so one corrupt directory does not stop a
// restart from the one before it.
func (m *Manager) Latest() (dir string, st State, ok bool, skipped []error, err error) {
	vs, err := m.versions()
	if err != nil {
		return "", State{}, false, nil, err
	}
	for _, v := range vs {
		p := m.Path(v)
		s, err := ReadState(p)
		if err == nil && s.Version != v {
			err = fmt.Errorf("checkpoint: %s holds state of version %d", p, s.Version)
		}
		if err != nil {
			skipped = append(skipped, fmt.Errorf("%s: %w", p, err))
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", State{}, false, skipped, fmt.Errorf("checkpoint: %w", err)
		}
		return abs, s, true, skipped, nil
	}
	return "", State{}, false, skipped, nil
}
