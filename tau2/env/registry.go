package env

import (
	"fmt"
	"slices"
	"sync"
)

// Options configure the construction of an environment.
type Options struct {
	// DataDir is the τ² data directory (the directory holding
	// tau2/domains/<domain>/); empty means the default location
	// (TAU2_DATA_DIR, else ../shared/tau2-data next to the module root; see
	// package data).
	DataDir string `yaml:"data_dir"`
	// Solo builds the environment in τ²'s solo mode (telecom, mock).
	Solo bool `yaml:"solo"`
	// Retrieval is banking_knowledge's retrieval configuration (τ²'s
	// --retrieval-config: no_knowledge, full_kb, golden_retrieval,
	// grep_only, bm25, bm25_grep); empty means the domain's default. Other
	// domains ignore it.
	Retrieval string `yaml:"retrieval_config"`
	// EmbeddingsURL is the OpenAI-compatible API base (…/v1) of the dense
	// retrieval configurations (openai_embeddings, openai_embeddings_grep);
	// the key comes from $OPENAI_API_KEY, vectors are cached on disk
	// ($TAU2_EMBEDDINGS_CACHE, else the user cache directory).
	EmbeddingsURL string `yaml:"embeddings_url"`
	// EmbeddingsModel is the embedding model (default text-embedding-3-large).
	EmbeddingsModel string `yaml:"embeddings_model"`
}

// Constructor builds a fresh environment for one episode. Implementations
// load their data once per process (see LoadOnce) and fork the loaded DBs,
// so calling a constructor per episode is cheap.
type Constructor func(opts Options) (*Environment, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Constructor{}
)

// Register makes a domain constructible by name ("airline", "retail",
// "telecom", "telecom-workflow", "mock"). Domain packages call it from init;
// registering a name twice panics.
func Register(domain string, c Constructor) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[domain]; dup {
		panic("env: domain registered twice: " + domain)
	}
	registry[domain] = c
}

// New builds a fresh environment of the named domain.
func New(domain string, opts Options) (*Environment, error) {
	regMu.RLock()
	c, ok := registry[domain]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("env: unknown domain %q (registered: %v)", domain, Domains())
	}
	e, err := c(opts)
	if err != nil {
		return nil, fmt.Errorf("env: new %s environment: %w", domain, err)
	}
	return e, nil
}

// Domains lists the registered domain names, sorted.
func Domains() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

type onceEntry struct {
	once sync.Once
	val  any
	err  error
}

var loadCache sync.Map // key -> *onceEntry

// LoadOnce runs load at most once per key per process (concurrent callers
// wait for the first) and returns its result; use it to load a domain's DB
// and policy once per data directory. A failed load is not cached, so a
// later call retries.
func LoadOnce[T any](key string, load func() (T, error)) (T, error) {
	ent, _ := loadCache.LoadOrStore(key, &onceEntry{})
	e := ent.(*onceEntry)
	e.once.Do(func() { e.val, e.err = load() })
	if e.err != nil {
		loadCache.CompareAndDelete(key, e)
		var zero T
		return zero, e.err
	}
	v, ok := e.val.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("env: LoadOnce key %q holds a %T", key, e.val)
	}
	return v, nil
}
