package localrun

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"tau2rl/gpu"
	"tau2rl/schemas/report"
)

// PerfFile is the run's one-line performance record in the run directory: one JSON object
// that docs/perf/*.jsonl collects, a line per run (issue 29).
const PerfFile = "perf.json"

// Perf is perf.json: what the loop turned out on this model and these GPUs, and the settings
// that decide it. Rates are report.json's grpo.gpu_time.loop; IdleShare is per role (the mean
// over a role's processes: every sampler, the trainer).
type Perf struct {
	Time string `json:"time"`
	// Model is the model's name (the config's or checkpoint's directory), Params its parameter
	// count; Weights says where they came from: SFT from random initialisation (the
	// conversations' shape then comes from the scripted user and the τ² tools, not from a
	// pretrained model's behaviour) or the Hugging Face checkpoint SFT started from.
	Model   string `json:"model"`
	Params  int64  `json:"params,omitempty"`
	Weights string `json:"weights"`
	// GPUs is how many devices the run used (the configuration's gpus; 0 on the cpu backend),
	// Layout how the roles share them (layoutFor: "1gpu-shared", "4gpu-3sampler-1trainer"),
	// Card nvidia-smi's name of the first GPU ("" without nvidia-smi).
	GPUs            int                `json:"gpus"`
	Layout          string             `json:"layout"`
	Card            string             `json:"card,omitempty"`
	EpisodesPerS    float64            `json:"episodes_per_s"`
	GenTokPerS      float64            `json:"gen_tok_per_s"`
	CallsPerS       float64            `json:"calls_per_s"`
	TrainedShare    float64            `json:"trained_share"`
	SyncShare       float64            `json:"sync_share"`
	CheckpointShare float64            `json:"checkpoint_share"`
	IdleShare       map[string]float64 `json:"idle_share"`
	GPUUtil         map[string]float64 `json:"gpu_util_pct,omitempty"`
	StalenessMean   float64            `json:"staleness_mean"`
	// EpisodesInFlight and OnSamplerShare are the loop's concurrency as it ran (LoopRates).
	EpisodesInFlight float64 `json:"episodes_in_flight"`
	OnSamplerShare   float64 `json:"on_sampler_share"`
	Offpolicyness    int     `json:"offpolicyness"`
	Commit           string  `json:"commit"`
	// The run's key settings.
	Policy       string  `json:"policy"`
	Backend      string  `json:"backend"`
	Domain       string  `json:"domain"`
	Concurrency  int     `json:"concurrency"`
	BatchSize    int     `json:"batch_size"`
	GroupSize    int     `json:"group_size"`
	MaxNewTokens int     `json:"max_new_tokens"`
	Steps        int     `json:"steps"`
	WallSeconds  float64 `json:"wall_s"`
}

// perfOf builds perf.json's record from the report and its GPU time.
func perfOf(cfg ExperimentConfig, rep *Report, g report.GPUTime, commit string, now time.Time) Perf {
	p := Perf{
		Time: now.UTC().Format(time.RFC3339), Model: modelName(cfg), Weights: "random initialisation + SFT",
		EpisodesPerS: g.Loop.EpisodesPerS, GenTokPerS: g.Loop.GenTokPerS, CallsPerS: g.Loop.CallsPerS,
		TrainedShare: g.Loop.TrainedShare, SyncShare: g.Loop.SyncShare, CheckpointShare: g.Loop.CheckpointShare,
		IdleShare: map[string]float64{}, StalenessMean: g.Loop.StalenessMean,
		EpisodesInFlight: g.Loop.EpisodesInFlight, OnSamplerShare: g.Loop.OnSamplerShare, Offpolicyness: cfg.Offpolicyness, Commit: commit,
		Policy: cfg.Policy, Backend: cfg.Backend, Domain: cfg.Domain, Concurrency: cfg.Concurrency, BatchSize: cfg.BatchSize,
		GroupSize: cfg.GroupSize, MaxNewTokens: cfg.MaxNewToken, Steps: rep.GRPO.Steps, WallSeconds: rep.GRPO.WallSeconds,
	}
	if cfg.ModelPath != "" {
		p.Weights = "SFT from " + cfg.ModelPath
	}
	src := cfg.ModelConfig
	if cfg.ModelPath != "" {
		src = cfg.ModelPath
	}
	if c, err := gpu.LoadConfig(src); err == nil {
		p.Params = c.NumParams()
	}
	for _, r := range g.Roles {
		if r.Role != report.RoleProducer {
			p.IdleShare[r.Role] = g.IdleShare(r.Role)
		}
	}
	for _, u := range g.GPUs {
		if p.GPUUtil == nil {
			p.GPUUtil = map[string]float64{}
		}
		p.GPUUtil[u.Index] = u.MeanUtil
		if p.Card == "" {
			p.Card = u.Card
		}
	}
	// The layout is the configuration's, not a guess from what nvidia-smi sees: a 4-GPU host
	// running the one-GPU baseline is "1gpu-shared".
	if l, err := layoutFor(cfg, os.Getenv("CUDA_VISIBLE_DEVICES")); err == nil {
		p.Layout, p.GPUs = l.Name, l.GPUs
	}
	return p
}

// modelName is the name of the model directory (deploy/models/qwen3-1.7b/config.json →
// qwen3-1.7b; a checkpoint directory → its name).
func modelName(cfg ExperimentConfig) string {
	src := cfg.ModelPath
	if src == "" {
		src = cfg.ModelConfig
	}
	src = filepath.Clean(src)
	if strings.HasSuffix(src, ".json") {
		src = filepath.Dir(src)
	}
	return filepath.Base(src)
}

// Commit is set at link time (-ldflags "-X tau2rl/deploy/localrun.Commit=…") by builds that know
// their commit without git's metadata; commit() prefers it.
var Commit string

// commit names the code that ran: Commit when set, else the Go toolchain's record of the binary's
// git revision (vcs.revision, with "-dirty" for uncommitted changes), else `git describe` in the
// working directory, else "unknown".
func commit() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			return rev[:min(len(rev), 12)] + dirty
		}
	}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return s
		}
	}
	return "unknown"
}

// writePerf writes perf.json.
func (e *experiment) writePerf(g report.GPUTime) error {
	p := perfOf(e.cfg, &e.rep, g, commit(), time.Now())
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("perf.json: %w", err)
	}
	path := filepath.Join(e.dir, PerfFile)
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("perf.json: %w", err)
	}
	e.printf("   %s (a line for docs/perf/)", path)
	return nil
}
