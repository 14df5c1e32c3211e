// Command tau2-sampler-bench plays a τ²-shaped serving load (gpu/sampler/loadgen) against any
// server speaking SGLang's /generate in token mode — tau2-sampler, SGLang, vLLM's SGLang route —
// and prints calls/s, output and prompt tokens/s, the prefix-cache hit share, p50/p99 per call,
// KV use, and the floor of that exact load on the card (given its copy bandwidth and matmul rate),
// two ways: each sequence reading its own KV, and shared prefixes read once. With out= it appends
// the run's JSON line (the docs/perf/ record).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/gpu"
	"tau2rl/gpu/sampler/loadgen"
)

const usage = `tau2-sampler-bench — a τ²-shaped serving benchmark against any SGLang-compatible /generate

Plays groups × samples conversations at once: a shared system prefix (sys tokens), a per-group
task prefix (task), then turns calls each resending the whole history to generate ~gen tokens
(ignore_eos, temperature 1, return_logprob) before reply tokens are appended. Reports calls/s,
output and prompt tokens/s, prefix-cache hits, p50/p99 per call, KV use (tau2-sampler), and the
floor of the load that ran on the card: model (a config.json directory, or 0.6B / 1.7B / 8B) with
copy_gb_s (device copy bandwidth, bytes read + written per second) and matmul_tflops.

Example:
  tau2-sampler model=/models/Qwen3-1.7B backend=cuda &
  tau2-sampler-bench url=http://127.0.0.1:30000 model=1.7B copy_gb_s=4000 matmul_tflops=800 card="NVIDIA H200"
  tau2-sampler-bench url=http://sglang:30000 model=/models/Qwen3-1.7B groups=16 out=run.jsonl`

// Config is the benchmark's configuration.
type Config struct {
	// URL is the server's base URL (required).
	URL string `yaml:"url"`
	// Model names the served architecture for the floors: a checkpoint directory (its
	// config.json) or 0.6B, 1.7B, 8B. Empty: no floors.
	Model string `yaml:"model"`
	// Card labels the record (e.g. "NVIDIA H200").
	Card string `yaml:"card"`
	// CopyGBs and MatmulTFLOPs are the card's measured rates for the floors.
	CopyGBs      float64 `yaml:"copy_gb_s"`
	MatmulTFLOPs float64 `yaml:"matmul_tflops"`
	// BlockSize is tau2-sampler's kv.block_size, to report KV use in tokens.
	BlockSize int `yaml:"block_size"`
	// Load is the load's shape.
	Groups  int    `yaml:"groups"`
	Samples int    `yaml:"samples"`
	Turns   int    `yaml:"turns"`
	Sys     int    `yaml:"sys"`
	Task    int    `yaml:"task"`
	Gen     int    `yaml:"gen"`
	GenSD   int    `yaml:"gen_sd"`
	Reply   int    `yaml:"reply"`
	Vocab   int    `yaml:"vocab"`
	Seed    uint64 `yaml:"seed"`
	// Timeout bounds the whole run.
	Timeout time.Duration `yaml:"timeout"`
	// Out, if set, gets the run's JSON line appended.
	Out string `yaml:"out"`
	// Commit and Note label the record.
	Commit string `yaml:"commit"`
	Note   string `yaml:"note"`
}

// DefaultConfig is the reference load (loadgen.Tau2Shape).
func DefaultConfig() Config {
	s := loadgen.Tau2Shape()
	return Config{BlockSize: 16, Groups: s.Groups, Samples: s.Samples, Turns: s.Turns, Sys: s.Sys, Task: s.Task,
		Gen: s.Gen, GenSD: s.GenSD, Reply: s.Reply, Vocab: s.Vocab, Seed: s.Seed, Timeout: 30 * time.Minute}
}

func (c Config) shape() loadgen.Shape {
	return loadgen.Shape{Groups: c.Groups, Samples: c.Samples, Turns: c.Turns, Sys: c.Sys, Task: c.Task, Gen: c.Gen,
		GenSD: c.GenSD, Reply: c.Reply, Vocab: c.Vocab, Seed: c.Seed}
}

// modelConfig resolves Config.Model.
func modelConfig(name string) (gpu.Config, error) {
	switch strings.ToLower(name) {
	case "0.6b", "qwen3-0.6b":
		return gpu.Qwen3_0_6B(), nil
	case "1.7b", "qwen3-1.7b":
		return gpu.Qwen3_1_7B(), nil
	case "8b", "qwen3-8b":
		return gpu.Qwen3_8B(), nil
	}
	return gpu.LoadConfig(name)
}

func main() {
	cfg := DefaultConfig()
	cli.Main(cli.App{Name: "tau2-sampler-bench", Usage: usage, MetricsAddr: "off"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, &cfg, os.Stdout)
	})
}

func run(ctx context.Context, cfg *Config, out *os.File) error {
	if cfg.URL == "" {
		return fmt.Errorf("%w: url (the server's base URL) is required", cli.ErrUsage)
	}
	s := cfg.shape()
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var mc gpu.Config
	if cfg.Model != "" {
		var err error
		if mc, err = modelConfig(cfg.Model); err != nil {
			return fmt.Errorf("%w: model: %v", cli.ErrUsage, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	client := &loadgen.SGLang{BaseURL: cfg.URL, BlockSize: cfg.BlockSize, HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	r, err := loadgen.Run(ctx, client, s)
	if err != nil {
		return err
	}
	hw := loadgen.Hardware{CopyBytesPerS: cfg.CopyGBs * 1e9, MatmulFLOPs: cfg.MatmulTFLOPs * 1e12}
	var f loadgen.Floor
	if cfg.Model != "" {
		f = loadgen.Floors(mc, r, hw)
	}
	fmt.Fprint(out, loadgen.Summary(r, f, hw))
	rec := loadgen.NewRecord(cfg.Model, cfg.Card, cfg.Commit, r, f, hw)
	rec.Server, rec.Note = cfg.URL, cfg.Note
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\n", line)
	if cfg.Out != "" {
		fh, err := os.OpenFile(cfg.Out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("out: %w", err)
		}
		_, werr := fmt.Fprintf(fh, "%s\n", line)
		if err := errors.Join(werr, fh.Close()); err != nil {
			return fmt.Errorf("out: %w", err)
		}
	}
	return nil
}
