package gpu

import (
	"fmt"
	"sort"
	"sync"
)

// Opener builds a backend from a Hugging Face checkpoint directory.
type Opener func(dir string) (Backend, error)

var (
	regMu    sync.Mutex
	registry = map[string]Opener{}
)

// Register makes a backend implementation available to Open under name ("cpu", "cuda"). Backend
// packages call it from init, so a main selects the backend by configuration and links CUDA only
// through a build-tagged blank import, never through the trainer's code. Registering a name twice
// panics: it is a programming error at init time.
func Register(name string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("gpu: backend " + name + " registered twice")
	}
	registry[name] = open
}

// Open loads the checkpoint in dir with the named backend.
func Open(name, dir string) (Backend, error) {
	regMu.Lock()
	open, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("gpu: no backend %q in this binary (have %v; the cuda backend needs -tags cuda)", name, Backends())
	}
	b, err := open(dir)
	if err != nil {
		return nil, fmt.Errorf("gpu: open %s backend: %w", name, err)
	}
	return b, nil
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	regMu.Lock()
	defer regMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
