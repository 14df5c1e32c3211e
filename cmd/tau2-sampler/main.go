// Command tau2-sampler is the policy's own inference server: a Qwen3 checkpoint served with a
// paged KV cache, a prefix cache, continuous batching and in-place weight reloads, speaking
// SGLang's /generate, vLLM's /v1/completions and OpenAI chat completions (docs/SAMPLER.md). The
// engine is gpu/sampler; the forward pass is gpu/cpu (any machine, the tiny test models) or
// gpu/cuda (binaries built with `make gpu-sampler`).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tau2rl/cmd/internal/cli"
	"tau2rl/gpu"
	"tau2rl/gpu/backends"
	"tau2rl/gpu/sampler"
	"tau2rl/gpu/sampler/httpapi"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/required"
)

const usage = `tau2-sampler — serves a Qwen3 checkpoint for RL rollouts (SGLang / vLLM / OpenAI wire formats)

Loads a Hugging Face Qwen3 checkpoint directory (config.json + safetensors) and serves on listen:
  POST /generate                  SGLang, token ids (input_ids, sampling_params, return_logprob)
  POST /v1/completions            vLLM, token-id prompt, logprobs: 0
  POST /v1/chat/completions       OpenAI chat with tools (Qwen3 template and tool-call parsing)
  POST /update_weights_from_disk  SGLang reload: {"model_path": DIR, "weight_version": V}
  POST /pause /start_weight_update /update_weights /finish_weight_update /resume   vLLM reload
  GET  /health /get_model_info /v1/models /metrics, POST /abort_request /pause_generation ...
Requests in flight when a reload lands are paused, recomputed on the new weights and resumed;
meta_info.weight_versions says which tokens each version sampled. SIGTERM stops accepting,
answers 503 with Retry-After to new requests (the listener stays open) while the requests in flight
finish for up to drain_timeout, then aborts the rest and exits. Served from a tau2-trainer
checkpoint (checkpoints/v<N>), the weight version reported is the checkpoint's (trainer_state.json,
else the directory name) unless engine.weight_version says otherwise.

Example:
  tau2-sampler model=checkpoints/v1 listen=127.0.0.1:30000   (tau2-trainer's first checkpoint, default checkpoint.dir)
  tau2-sampler model=/models/Qwen3-0.6B backend=cuda kv.memory_fraction=0.5   (make gpu-sampler)
  tau2-producer policy.backend=sglang policy.endpoints=[http://127.0.0.1:30000]`

// Config is tau2-sampler's configuration.
type Config struct {
	// Model is the Hugging Face checkpoint directory to serve (required).
	Model string `yaml:"model"`
	// Listen is the API address. Default 127.0.0.1:30000 (SGLang's port).
	Listen string `yaml:"listen"`
	// Backend runs the forward pass: cpu (pure Go, default) or cuda (binaries built with
	// -tags cuda, `make gpu-sampler`).
	Backend string `yaml:"backend"`
	// ServedModelName is the model name in /v1/models and responses. Default: the model
	// directory's base name.
	ServedModelName string `yaml:"served_model_name"`
	// Tokenizer is a tokenizer.json (or its directory) for stop strings, text outputs and chat;
	// default: the model directory's tokenizer.json, else $QWEN3_TOKENIZER_DIR or
	// ../shared/qwen3-tokenizer; "none" serves token ids only.
	Tokenizer string `yaml:"tokenizer"`
	// KV sizes the paged KV cache.
	KV KVConfig `yaml:"kv"`
	// Engine are the scheduler's limits.
	Engine sampler.Config `yaml:"engine"`
	// DrainTimeout is how long SIGTERM lets requests in flight finish. Default 30s.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// CheckpointDir is the trainer's checkpoint.dir (optional). When set, the sampler starts on
	// its newest complete checkpoint v<N> with weight version N (model is then only the fallback
	// for a directory without one), and SIGHUP — `systemctl reload` — swaps in the newest
	// checkpoint in place, so a restarted sampler does not serve stale weights (reload.go).
	CheckpointDir string `yaml:"checkpoint_dir"`
}

// KVConfig sizes the cache.
type KVConfig struct {
	// BlockSize is the token slots per block (a power of two ≤ 256). Default 16.
	BlockSize int `yaml:"block_size"`
	// Blocks fixes the number of blocks; 0 sizes the cache by MemoryFraction (cuda) or to
	// CPUTokens (cpu).
	Blocks int `yaml:"blocks"`
	// MemoryFraction is the fraction of the GPU's free memory (after the weights) the cuda
	// backend gives the cache. Default 0.85; lower it when the trainer shares the card.
	MemoryFraction float64 `yaml:"memory_fraction"`
	// CPUTokens is the cpu backend's default cache size in tokens. Default 16384.
	CPUTokens int `yaml:"cpu_tokens"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Listen: "127.0.0.1:30000", Backend: "cpu",
		KV:           KVConfig{BlockSize: 16, MemoryFraction: 0.85, CPUTokens: 16384},
		Engine:       sampler.Config{MaxRunning: 256, MaxStepTokens: 2048},
		DrainTimeout: 30 * time.Second,
	}
}

// Validate reports settings the server cannot start with.
func (c *Config) Validate() error {
	switch {
	case c.Model == "":
		return fmt.Errorf("model (a checkpoint directory) is %w", required.ErrMissing)
	case c.Listen == "":
		return fmt.Errorf("listen is %w", required.ErrMissing)
	case !backends.IsKnown(c.Backend):
		return fmt.Errorf("backend %q: want one of %s", c.Backend, strings.Join(backends.Known(), ", "))
	case c.KV.Blocks < 0:
		return fmt.Errorf("kv.blocks %d must be ≥ 0", c.KV.Blocks)
	case !(c.KV.MemoryFraction > 0 && c.KV.MemoryFraction < 1):
		return fmt.Errorf("kv.memory_fraction %v must be in (0, 1)", c.KV.MemoryFraction)
	case c.KV.CPUTokens <= 0:
		return fmt.Errorf("kv.cpu_tokens %d must be > 0", c.KV.CPUTokens)
	case c.Engine.MaxRunning < 0 || c.Engine.MaxStepTokens < 0 || c.Engine.ContextLength < 0 || c.Engine.SampleVocabLimit < 0:
		return errors.New("engine.max_running, engine.max_step_tokens, engine.context_length and engine.sample_vocab_limit must be ≥ 0")
	case c.DrainTimeout < 0:
		return fmt.Errorf("drain_timeout %v must be ≥ 0", c.DrainTimeout)
	}
	return gpu.KVCacheSpec{BlockSize: c.KV.BlockSize, NumBlocks: 1}.Validate()
}

func main() {
	cfg := DefaultConfig()
	cli.Main(cli.App{Name: "tau2-sampler", Usage: usage, MetricsAddr: "127.0.0.1:9430"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, rt, &cfg, nil)
	})
}

// loadTokenizer finds the tokenizer per Config.Tokenizer (nil, nil for "none").
func loadTokenizer(c *Config) (*tokenizer.Tokenizer, string, error) {
	path := c.Tokenizer
	switch path {
	case "none":
		return nil, "", nil
	case "":
		if _, err := os.Stat(filepath.Join(c.Model, "tokenizer.json")); err == nil {
			path = c.Model
		} else if dir, err := tokenizer.LocateQwen3(); err == nil {
			path = dir
		} else {
			return nil, "", nil
		}
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return nil, "", err
	}
	return tok, path, nil
}

// checkpointVersion is the policy version of a tau2-trainer checkpoint directory, so that a
// sampler started from checkpoints/v2 reports weight_version "2" as the one reloaded to it would:
// trainer_state.json's "version" when the file is there, else the N of a directory named v<N>,
// else "" (a Hugging Face model directory: the engine reports "0"). An unreadable state file is
// an error, with the directory name's version still returned when it has one.
func checkpointVersion(dir string) (string, error) {
	fromName := ""
	if base := filepath.Base(filepath.Clean(dir)); len(base) > 1 && base[0] == 'v' {
		if n, err := strconv.ParseInt(base[1:], 10, 64); err == nil && n >= 0 {
			fromName = strconv.FormatInt(n, 10)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "trainer_state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return fromName, nil
	}
	if err != nil {
		return fromName, fmt.Errorf("checkpoint version: %w", err)
	}
	var st struct {
		Version *int64 `json:"version"`
	}
	if err := json.Unmarshal(data, &st); err != nil || st.Version == nil || *st.Version < 0 {
		return fromName, fmt.Errorf("checkpoint version: %s has no valid \"version\" (%v)", filepath.Join(dir, "trainer_state.json"), err)
	}
	return strconv.FormatInt(*st.Version, 10), nil
}

// run serves until ctx ends; bound, if non-nil, receives the API address once listening (tests).
func run(ctx context.Context, rt *cli.Runtime, cfg *Config, bound chan<- string) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	hup, stopHup := reloadSignals()
	defer stopHup()
	if err := resolveStartCheckpoint(cfg, rt.Log); err != nil {
		return err
	}
	// A backend this binary was built without is refused before the weights load (exit status 2,
	// saying which build has it).
	be, err := backends.Get(cfg.Backend)
	if err != nil {
		return cli.Usage(err)
	}
	w, err := gpu.LoadWeights(cfg.Model)
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	tok, tokPath, err := loadTokenizer(cfg)
	if err != nil {
		return fmt.Errorf("%w: tokenizer: %v", cli.ErrUsage, err)
	}
	dec, err := be.Decoder(w, backends.KV{BlockSize: cfg.KV.BlockSize, Blocks: cfg.KV.Blocks,
		MemoryFraction: cfg.KV.MemoryFraction, CPUTokens: cfg.KV.CPUTokens})
	if err != nil {
		return fmt.Errorf("sampler: %s backend: %w", cfg.Backend, err)
	}
	defer dec.Close()
	met, err := sampler.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	ecfg := cfg.Engine
	if ecfg.WeightVersion == "" {
		v, err := checkpointVersion(cfg.Model)
		if err != nil {
			rt.Log.Warn("cannot read the checkpoint's version; set engine.weight_version", "err", err)
		}
		ecfg.WeightVersion = v // "" → the engine's "0"
	}
	eng, err := sampler.New(dec, ecfg, tok, met, rt.Log.With("component", "engine"))
	if err != nil {
		return err
	}
	engErr := make(chan error, 1)
	go func() { engErr <- eng.Run(context.Background()) }()
	defer func() { eng.Close(); <-eng.Done() }()

	name := cfg.ServedModelName
	if name == "" {
		name = filepath.Base(filepath.Clean(cfg.Model))
	}
	api := httpapi.New(eng, httpapi.Options{ModelName: name, ModelPath: cfg.Model, TokenizerPath: tokPath, Log: rt.Log.With("component", "http")})
	mux := http.NewServeMux()
	mux.Handle("/", api.Handler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(rt.Registry, promhttp.HandlerOpts{Registry: rt.Registry}))
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("sampler: listen %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	kv := dec.KVSpec()
	rt.Log.Info("serving", "url", "http://"+ln.Addr().String(), "model", cfg.Model, "backend", cfg.Backend,
		"kv_blocks", kv.NumBlocks, "block_size", kv.BlockSize, "kv_tokens", kv.Tokens(), "context_length", eng.ContextLength(),
		"tokenizer", tokPath != "")
	if bound != nil {
		bound <- ln.Addr().String()
	}
	var serving atomic.Bool
	servingMetrics(rt.Registry, eng, serving.Load, rt.Log)
	serving.Store(true)
	rt.Ready()
	go serveReloads(ctx, hup, cfg, api.Handler(), eng, rt.Log)

	select {
	case <-ctx.Done():
	case err := <-srvErr:
		return fmt.Errorf("sampler: serve: %w", err)
	case err := <-engErr:
		_ = srv.Close()
		return fmt.Errorf("sampler: engine stopped: %w", err)
	}
	// Drain: new requests get 503 + Retry-After on the open listener (a refused connection looks
	// like a dead host to clients; a 503 is retried elsewhere), the requests in flight finish for
	// up to drain_timeout, the rest are aborted, and only then does the listener close.
	rt.Log.Info("draining", "grace", cfg.DrainTimeout, "running", eng.Stats().Running, "queued", eng.Stats().Waiting)
	api.SetDraining(true)
	deadline := time.Now().Add(cfg.DrainTimeout)
	for api.InFlight() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := api.InFlight(); n > 0 {
		rt.Log.Warn("drain timed out; aborting requests in flight", "in_flight", n)
		eng.Close() // in-flight requests answer finish_reason abort
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
