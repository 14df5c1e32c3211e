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
//	v<N>.unreadable-<time>/ an unreadable v<N> set aside when a new v<N> was published over it
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
// # Unreadable checkpoints
//
// A checkpoint is readable when its state file parses and names its own version, its config.json
// and safetensors files are complete (every header valid, every data buffer the size its header
// says, every tensor of the config present with its shape) and, when the state says the optimizer
// state was saved, that state is there and complete too (Verify; headers and sizes only, so it
// costs a few small reads, not a load). Anything else — an empty trainer_state.json after a full
// disk, a truncated model.safetensors, a lost optimizer shard — makes it unreadable, and:
//
//   - Latest skips it and returns the newest readable one, reporting why each newer one was
//     skipped; Resume turns that into the trainer's start-up decision (fall back and say so, or
//     refuse to start when checkpoints exist but none is readable, unless the operator asked to
//     start fresh).
//   - Pruning counts only readable checkpoints toward Keep and never deletes an unreadable one
//     (it may be repairable by hand: an empty state file beside intact weights); it reports each
//     once. Without this, one unreadable newest directory with Keep=1 made every new checkpoint
//     the "oldest" and deleted it as soon as it was written.
//   - Save publishing a version whose directory exists (only an unreadable one can be in the
//     way) renames the old one to v<N>.unreadable-<time> instead of deleting it.
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
	"tau2rl/gpu/safetensors"
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
	// reported holds the unreadable versions prune has already warned about.
	reported map[int64]bool
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
	// A directory of the same version exists only when an earlier run wrote it but it could not
	// be used (Latest skipped it, or the operator started fresh): set it aside, never delete it.
	if err := m.setAside(final); err != nil {
		return fail(err)
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

// setAside renames an existing directory at path (an unreadable checkpoint of the version being
// published) to <path>.unreadable-<UTC time>, which versions ignores, and says so.
func (m *Manager) setAside(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	aside := path + ".unreadable-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	why := "it is in the way"
	if _, err := Verify(path); err != nil {
		why = err.Error()
	}
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("checkpoint: set aside %s before publishing over it: %w", path, err)
	}
	m.logger().Warn("an earlier checkpoint of this version was set aside (kept for inspection; delete it when done)",
		"checkpoint", path, "moved_to", aside, "reason", why)
	return nil
}

// prune deletes readable checkpoints beyond the newest Keep readable ones. Unreadable ones do
// not count toward Keep and are never deleted (see the package doc); each is reported once per
// Manager.
func (m *Manager) prune() error {
	vs, err := m.versions()
	if err != nil {
		return err
	}
	readable := 0
	for _, v := range vs {
		p := m.Path(v)
		if _, err := Verify(p); err != nil {
			if !m.reported[v] {
				if m.reported == nil {
					m.reported = map[int64]bool{}
				}
				m.reported[v] = true
				m.logger().Warn("unreadable checkpoint: not counted toward checkpoint.keep and not deleted; repair or remove it",
					"checkpoint", p, "err", err)
			}
			continue
		}
		readable++
		if readable > m.Keep {
			if err := os.RemoveAll(p); err != nil {
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
	p := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: %w", err)
	}
	if len(b) == 0 {
		return State{}, fmt.Errorf("checkpoint: %s is empty (the write did not complete: a full disk or a crash of the storage)", p)
	}
	st, err := ParseState(b)
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", p, err)
	}
	return st, nil
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

// Verify checks that checkpoint directory dir is readable (see the package doc: state, config,
// weights and, when the state records it, optimizer state; headers and sizes, no tensor data)
// and returns its state. The error says what is wrong, naming the file.
func Verify(dir string) (State, error) {
	st, err := ReadState(dir)
	if err != nil {
		return State{}, err
	}
	// A v<N> directory must hold version N (a copied or renamed directory would otherwise resume
	// under the wrong version).
	if base := filepath.Base(filepath.Clean(dir)); strings.HasPrefix(base, "v") {
		if v, err := strconv.ParseInt(base[1:], 10, 64); err == nil && v != st.Version {
			return State{}, fmt.Errorf("checkpoint: %s holds the state of version %d", dir, st.Version)
		}
	}
	cfg, err := gpu.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: weights: %w", err)
	}
	if err := verifyWeights(dir, cfg); err != nil {
		return State{}, fmt.Errorf("checkpoint: weights: %w", err)
	}
	if st.Optimizer == OptimizerSaved {
		if err := verifyOptimizer(dir, cfg); err != nil {
			return State{}, fmt.Errorf("checkpoint: the state records optimizer state, but %w", err)
		}
	}
	return st, nil
}

// verifyWeights checks that dir's safetensors files are complete and hold every tensor of cfg
// with its shape (what gpu.LoadWeights would refuse, without reading the data).
func verifyWeights(dir string, cfg gpu.Config) error {
	d, err := safetensors.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for _, s := range gpu.ParamSpecs(cfg) {
		info, ok := d.Info(s.Name)
		if !ok {
			return fmt.Errorf("%s: no tensor %q", dir, s.Name)
		}
		if !slices.Equal(info.Shape, s.Shape) {
			return fmt.Errorf("%s: %s has shape %v, config.json wants %v", dir, s.Name, info.Shape, s.Shape)
		}
	}
	return nil
}

// verifyOptimizer checks the optimizer state of dir: gpu.OptimizerStateFile with a header that
// gpu.CheckOptimizerStateHeader accepts, or a data-parallel trainer's complete set of per-rank
// shards, each a complete safetensors file.
func verifyOptimizer(dir string, cfg gpu.Config) error {
	p := filepath.Join(dir, gpu.OptimizerStateFile)
	if _, err := os.Stat(p); err == nil {
		f, err := safetensors.Open(p)
		if err != nil {
			return fmt.Errorf("it is unreadable: %w", err)
		}
		defer f.Close()
		if _, err := gpu.CheckOptimizerStateHeader(cfg, f); err != nil {
			return fmt.Errorf("%s is unreadable: %w", p, err)
		}
		return nil
	}
	ok, err := dp.HasShards(dir)
	if err != nil {
		return fmt.Errorf("its shards are incomplete: %w", err)
	}
	if !ok {
		return fmt.Errorf("%s holds neither %s nor optimizer shards", dir, gpu.OptimizerStateFile)
	}
	shards, err := filepath.Glob(filepath.Join(dir, "optimizer-rank-*-of-*.safetensors"))
	if err != nil {
		return err
	}
	for _, s := range shards {
		f, err := safetensors.Open(s)
		if err != nil {
			return fmt.Errorf("a shard is unreadable: %w", err)
		}
		f.Close()
	}
	return nil
}

// Latest returns the newest readable checkpoint (Verify). ok is false when there is none.
// Unreadable checkpoints are skipped (and reported through skipped, newest first) rather than
// fatal, so one corrupt directory does not stop a restart from the one before it; whether
// skipping is acceptable is the caller's decision (Resume).
func (m *Manager) Latest() (dir string, st State, ok bool, skipped []error, err error) {
	vs, err := m.versions()
	if err != nil {
		return "", State{}, false, nil, err
	}
	for _, v := range vs {
		p := m.Path(v)
		s, err := Verify(p)
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

// ErrNoReadable is returned by Resume when the checkpoint directory holds checkpoints but none of
// them is readable.
var ErrNoReadable = errors.New("checkpoint: no readable checkpoint")

// Resume decides where a trainer starts: the newest readable checkpoint (found is true), logging
// which newer ones were skipped and why; or, when Dir holds no checkpoint at all, nowhere (found is
// false: start from the initial model). When Dir holds checkpoints but none is readable, starting
// from the initial model would silently throw the training away (and publish version 1 after
// version N), so Resume returns an error wrapping ErrNoReadable that lists them — unless
// startFresh (checkpoint.start_fresh) says the operator wants exactly that; the unreadable
// directories are then left in place (pruning never deletes them) and st, with found false,
// carries only the highest version found there as Version and Step, so the fresh run's versions
// and steps continue after them instead of starting again at 1. startFresh never overrides a
// readable checkpoint: a setting left on cannot restart a healthy run from scratch.
func (m *Manager) Resume(startFresh bool) (dir string, st State, found bool, err error) {
	dir, st, found, skipped, err := m.Latest()
	if err != nil {
		return "", State{}, false, err
	}
	log := m.logger()
	if found {
		for _, s := range skipped {
			log.Warn("newer checkpoint is unreadable: falling back to an older one", "resume_from", dir, "skipped", s)
		}
		return dir, st, true, nil
	}
	if len(skipped) == 0 {
		return "", State{}, false, nil
	}
	if startFresh {
		for _, s := range skipped {
			log.Warn("checkpoint.start_fresh: ignoring an unreadable checkpoint (left in place)", "skipped", s)
		}
		// The fresh run continues the version numbering after the highest directory: the
		// producers follow the highest policy version they have seen and drop rollout requests
		// older than it allows, so a trainer that published version 1 after version N would
		// wait forever for groups; and steps.jsonl would lose the records of steps 1..N.
		vs, err := m.versions()
		if err != nil {
			return "", State{}, false, err
		}
		if len(vs) > 0 {
			st = State{Version: vs[0], Step: vs[0]}
			log.Warn("checkpoint.start_fresh: starting from the initial model; versions continue after the unreadable ones",
				"first_new_version", st.Version+1)
		}
		return "", st, false, nil
	}
	msgs := make([]string, len(skipped))
	for i, s := range skipped {
		msgs[i] = "  " + s.Error()
	}
	return "", State{}, false, fmt.Errorf("%w in %s: %d checkpoint(s), none usable, so this trainer will not start "+
		"(starting over would discard the training they hold):\n%s\n"+
		"Repair them (a checkpoint needs trainer_state.json, config.json, the weights and, when recorded, the optimizer state), "+
		"or set checkpoint.start_fresh=true to start from the initial model and leave them in place",
		ErrNoReadable, m.Dir, len(skipped), strings.Join(msgs, "\n"))
}
