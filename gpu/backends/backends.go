// Package backends is the one registry of model backends. A binary that runs a model — the
// trainer (tau2-trainer, its sft command) and the sampler (tau2-sampler) — names its backend in
// its configuration (backend: cpu | cuda) and gets it here with Get; it never lists backends of
// its own. Each backend registers itself from one file of this package: cpu.go always, cuda.go
// only in binaries built with -tags cuda (it links the kernels), and nocuda.go, in the other
// builds, registers "cuda" as known but missing, so backend=cuda says how to build a binary that
// has it instead of "unknown backend".
//
// A backend is a set of constructors: the trainer's (Load, Random, Shard) and the collectives its
// data-parallel ranks talk through (LocalComms, CommID, HostComms), and the sampler's Decoder.
// A new backend is one folder beside gpu/cpu and gpu/cuda implementing gpu.Backend and
// gpu.Decoder, plus one file here whose init calls Register (docs/ARCHITECTURE.md, "Where new
// things go").
package backends

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/cuda"
)

// ErrNotBuilt is returned by Get for a backend this binary was built without (backend=cuda in a
// binary built without -tags cuda): a usage error, fixed by another build, not by another value.
var ErrNotBuilt = errors.New("backend not available in this binary")

// Options are the settings of a binary's configuration that a backend's constructors may read;
// each backend ignores the others'.
type Options struct {
	// CUDA tunes the cuda backend; Device is the rank's GPU.
	CUDA cuda.Options
}

// World places a process's local ranks in the collective world of a data-parallel trainer.
type World struct {
	// Devices are the local ranks' GPU ordinals, one rank each (cuda); empty for cpu.
	Devices []int
	// Ranks is the number of local ranks (len(Devices) when set).
	Ranks int
	// FirstRank is the global rank of local rank 0 and Size the world's rank count: 0 and Ranks
	// on one host, host_rank × Ranks and hosts × Ranks across hosts.
	FirstRank, Size int
	// Job names the training job (the trainer's consumer group): the cpu hub refuses ranks of
	// another job.
	Job string
	// Addr is the leader's step-feed address host:port (several hosts only); the cpu backend's
	// hub listens on its host.
	Addr string
	// Timeout bounds joining the world across hosts.
	Timeout time.Duration
}

// KV sizes the sampler's paged KV cache.
type KV struct {
	// BlockSize is the token slots per block.
	BlockSize int
	// Blocks fixes the number of blocks; 0 lets the backend size the cache: MemoryFraction of
	// the GPU memory the weights leave (cuda) or CPUTokens tokens (cpu).
	Blocks         int
	MemoryFraction float64
	CPUTokens      int
}

// Backend is one registered backend's constructors. A nil constructor is a capability the
// backend lacks; the caller says which (a trainer across hosts without CommID, say).
type Backend struct {
	// Name is the registered name (set by Register).
	Name string
	// Load reads a Hugging Face checkpoint directory for training.
	Load func(dir string, o Options) (gpu.Backend, error)
	// Random initialises a model of shape mc with seed.
	Random func(mc gpu.Config, seed uint64, o Options) (gpu.Backend, error)
	// Shard, when set, builds data-parallel rank `rank` of `world` directly from host weights
	// shared by all the process's ranks, never holding the whole optimizer state on one device
	// (cuda.NewShard: how an 8B rank fits an 80 GB GPU). Without it a rank is built whole and
	// gpu/dp shards it.
	Shard func(w *gpu.Weights, o Options, rank, world int) (gpu.Backend, error)
	// LocalComms joins the ranks of a world on this host alone (w.FirstRank 0, w.Size w.Ranks).
	LocalComms func(w World) ([]collective.Comm, error)
	// CommID makes the unique id of a world spanning several hosts (the leader sends it to the
	// followers in the step feed's welcome), and HostComms joins this host's ranks
	// w.FirstRank … w.FirstRank+w.Ranks−1 to it. Both nil: the backend cannot train across hosts.
	CommID    func(w World) ([]byte, error)
	HostComms func(w World, id []byte) ([]collective.Comm, error)
	// Decoder builds the sampler's forward pass over a paged KV cache sized by kv.
	Decoder func(w *gpu.Weights, kv KV) (gpu.Decoder, error)

	// missing, set by RegisterMissing, says how to get a binary that has this backend.
	missing string
}

var (
	mu       sync.RWMutex
	registry = map[string]Backend{}
)

// Register adds a backend under name; a second registration of a name panics (two files
// claiming one backend is a build mistake).
func Register(name string, b Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("backends: %q registered twice", name))
	}
	b.Name = name
	registry[name] = b
}

// RegisterMissing records a backend this build leaves out, with how to get it (the build tag,
// the make target), so that asking for it is an actionable error.
func RegisterMissing(name, how string) {
	Register(name, Backend{missing: how})
}

// Get returns the backend registered as name. A backend this binary was built without is
// ErrNotBuilt, with how to build one that has it; an unknown name is an error listing the
// backends this binary has and every name it knows.
func Get(name string) (Backend, error) {
	mu.RLock()
	b, ok := registry[name]
	mu.RUnlock()
	switch {
	case !ok:
		return Backend{}, fmt.Errorf("backend %q is not available in this binary (have: %s; known: %s)", name, strings.Join(Names(), ", "), strings.Join(Known(), ", "))
	case b.missing != "":
		return Backend{}, fmt.Errorf("%w: backend %q (have: %s): %s", ErrNotBuilt, name, strings.Join(Names(), ", "), b.missing)
	}
	return b, nil
}

// Names lists the backends this binary was built with, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var names []string
	for n, b := range registry {
		if b.missing == "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Known lists every backend name a configuration may give, built into this binary or not, sorted.
func Known() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Sorted(maps.Keys(registry))
}

// IsKnown reports whether name is a backend a configuration may give (built in or not).
func IsKnown(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	_, ok := registry[name]
	return ok
}

// backend returns v as a gpu.Backend, or a nil interface on error: a constructor's typed nil
// (a nil *cpu.Backend) inside a non-nil interface would be closed by a caller cleaning up.
func backend[T gpu.Backend](v T, err error) (gpu.Backend, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// decoder is backend for gpu.Decoder.
func decoder[T gpu.Decoder](v T, err error) (gpu.Decoder, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}
