// Command tau2-trainer trains a Qwen3 policy with GRPO on scored τ²-bench trajectories from Kafka.
// It is wiring only; the work is in tau2rl/trainer/... (see trainer/step for the loop).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/backends"
	"tau2rl/gpu/cuda"
	"tau2rl/lib/assets"
	"tau2rl/lib/inference/llm"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/tau2/data"
	"tau2rl/trainer/admission"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
	"tau2rl/trainer/kafkaio"
	"tau2rl/trainer/step"
	"tau2rl/trainer/topology"

	"tau2rl/cmd/internal/cli"
)

const usage = `tau2-trainer — GRPO trainer for tool-using agents on τ²-bench (tau2rl)

Consumes scored trajectories (consumer group consumer_group), groups them by task, computes GRPO
advantages, packs the step's LLM calls into prefix trees, and runs the decoupled PPO update on the
model backend. Every checkpoint.every steps it saves checkpoints/v<N>/ (Hugging Face safetensors,
optimizer.safetensors with the AdamW state, trainer_state.json; atomically), commits the offsets
that checkpoint covers, reloads the inference servers (reload.backend) and publishes policy
version N. reload.mode=auto (default) sends the weights by CUDA IPC to a tau2-sampler on the
trainer's GPU (backend=cuda, /update_weights_from_ipc: no disk round trip) and reloads every other
server from the checkpoint, except a tau2-sampler on another GPU or host, which joins the
trainer's weight-sync group and takes each version by a broadcast from rank 0 (reload.sync.*;
/update_weights_from_distributed: no disk round trip either); disk, ipc and distributed force one
path. It issues rollout requests itself so
in-flight work never runs more than max_head_offpolicyness versions ahead (admission.*).

It resumes from the newest readable checkpoint in checkpoint.dir, optimizer state included, so the
run continues exactly as if it had not stopped (an unreadable newer one is skipped, and logged);
otherwise it starts from model.path (a Hugging Face Qwen3 checkpoint) or a random initialisation
of model.config (a config.json). One of the two is required: there is no default model (a shape
small enough for any machine could not hold Qwen3's 151,936-token vocabulary, so it could not
train on any real trajectory). If checkpoint.dir holds checkpoints but none is readable, it
refuses to start unless checkpoint.start_fresh=true. Either way, before it issues a rollout
request it reloads the inference servers with its weights under its version (the resumed
checkpoint's, or 0: from model.path, which the servers must see at the same path, by CUDA IPC, or
for a random initialisation from checkpoint.dir/initial, written first), so no token carries a
version the trainer never had.

backend: cpu (pure Go reference; small models) or cuda (only in binaries built with -tags cuda).
parallel.devices=[0,1,…] trains on several GPUs of the host (data parallel, sharded optimizer state,
NCCL; run with NCCL_NVLS_ENABLE=0; docs/MULTIGPU.md); the job stays one consumer-group member.
Several hosts: one tau2-trainer per host with the same settings and parallel.hosts=H
parallel.host_rank=h parallel.feed_addr=HOST0:PORT. Host 0 is the trainer and listens on feed_addr;
hosts 1…H−1 read no Kafka: they dial it, take each step's data and write their optimizer shards
into checkpoint.dir, which must be a file system every host sees at the same path. A follower that
fails fails the leader's step (every host restarts); a clean leader shutdown ends the followers
with status 0. backend cuda: NCCL across hosts (untested); cpu: parallel.ranks per host joined by a
TCP hub in host 0's process (smoke runs). docs/MULTIGPU.md, "Several hosts".

Advantages default to GRPO (group mean baseline ÷ group std, equal-reward groups dropped). AReaL's
shipped τ² practice is:
  actor.advantage.mode=areal actor.advantage.reward_bias=-0.5 actor.advantage.reward_scaling=10
  actor.advantage.reward_clip=20 actor.advantage.drop_equal_rewards=false actor.advantage.max_mean_reward=0.95

Examples:
  tau2-trainer --config deploy/trainer.yaml
  tau2-trainer model.path=/models/Qwen3-1.7B backend=cuda actor.optimizer.lr=1e-5 batch_size=16
  # local smoke run beside tau2-broker (127.0.0.1:9092), after tau2-producer's (4 airline tasks × 4
  # trials of the flawless scripted policy: equal rewards, kept here): one CPU step, about a minute
  tau2-trainer admission.enabled=false max_steps=1 batch_size=4 group.group_size=4 \
      actor.advantage.drop_equal_rewards=false model.config=deploy/models/qwen3-tiny/config.json

Supervised fine-tuning from an archived dataset or a release: tau2-trainer sft --help`

// ReloadConfig names the inference servers to reload after each checkpoint.
type ReloadConfig struct {
	// Backend is "none" (default: nothing to reload), "sglang" or "vllm".
	Backend string `yaml:"backend"`
	// Model is vLLM's served model name.
	Model string `yaml:"model"`
	// Endpoints are the servers (base_url, api_key, timeouts, retries).
	Endpoints []llm.EndpointConfig `yaml:"endpoints"`
	// Mode is how the weights reach an SGLang-protocol server: "disk" (the checkpoint just
	// written, /update_weights_from_disk), "ipc" (tau2-sampler on the trainer's GPU: a CUDA IPC
	// handle of the trainer's bf16 weights, /update_weights_from_ipc, no disk round trip) or
	// "auto" (default: ipc for each server that reports the trainer's GPU in /model_info, disk
	// for the others; logged per server). vLLM servers always reload from disk.
	// "distributed": every server joins the trainer's weight-sync group and takes each version
	// by a broadcast from rank 0 (/init_weights_update_group, /update_weights_from_distributed;
	// tau2-sampler only, on other GPUs or hosts); auto also picks it for a tau2-sampler on another
	// GPU that lists sync.backend in /model_info's weight_sync. docs/OPERATIONS.md.
	Mode string `yaml:"mode"`
	// Sync is the weight-sync group of reload.mode=distributed and auto.
	Sync SyncConfig `yaml:"sync"`
}

// SyncConfig is the trainer's rank 0 of the weight-sync group (gpu/weightsync).
type SyncConfig struct {
	// Backend is "auto" (default: nccl when the trainer's bf16 weights are on one GPU and the
	// binary has NCCL, tcp for the pure-Go backend, else none: a data-parallel cuda group reloads
	// from disk), "nccl", "tcp" (gpu/collective's host-memory hub) or "off" (auto never forms a
	// group; distributed is refused).
	Backend string `yaml:"backend"`
	// Listen is where the rendezvous listens (host:port; port 0 picks a free one). Default
	// "127.0.0.1:0": samplers on this host only; several hosts need a reachable address.
	Listen string `yaml:"listen"`
	// Address is the host the servers dial (master_address); default the listen host.
	Address string `yaml:"address"`
	// Group is the group_name. Default "tau2rl-weights".
	Group string `yaml:"group"`
	// JoinTimeout bounds forming the group, UpdateTimeout one version's update (defaults 60s and
	// 10m): a server that never joins or dies fails the reload instead of blocking training.
	JoinTimeout   time.Duration `yaml:"join_timeout"`
	UpdateTimeout time.Duration `yaml:"update_timeout"`
}

// Config is the trainer's configuration. The training keys (batch_size, max_head_offpolicyness,
// group.*, actor.*, checkpoint.*, admission.*) are step.Config's, inline.
type Config struct {
	// Backend is "cpu" (default) or "cuda".
	Backend string `yaml:"backend"`
	// CUDA tunes the cuda backend.
	CUDA cuda.Options `yaml:"cuda"`
	// Model is the starting point when checkpoint.dir has no checkpoint.
	Model topology.Model `yaml:"model"`
	// Kafka is the transport.
	Kafka tkafka.Config `yaml:"kafka"`
	// ConsumerGroup is the trainer's consumer group. Default "trainer".
	ConsumerGroup string `yaml:"consumer_group"`
	// DataDir is the τ² data root, for the task splits admission cycles through. Default: found
	// by lib/assets as by every binary ($TAU2_DATA_DIR, ../shared/tau2-data, the cache, a pinned
	// download; docs/ASSETS.md).
	DataDir string `yaml:"data_dir"`
	// Reload configures the inference servers to reload.
	Reload ReloadConfig `yaml:"reload"`
	// Parallel trains on several GPUs of this host (data parallelism with sharded optimizer
	// state). Default: one GPU.
	Parallel topology.Parallel `yaml:"parallel"`

	step.Config `yaml:",inline"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Backend:       "cpu",
		CUDA:          cuda.DefaultOptions(),
		Model:         topology.Model{Seed: 1},
		Kafka:         tkafka.DefaultConfig(),
		ConsumerGroup: kafkaio.DefaultGroup,
		Reload: ReloadConfig{Backend: "none", Mode: llm.ReloadAuto, Sync: SyncConfig{Backend: "auto", Listen: "127.0.0.1:0", Group: "tau2rl-weights",
			JoinTimeout: llm.DefaultSyncJoinTimeout, UpdateTimeout: llm.DefaultSyncUpdateTimeout}},
		Config: step.DefaultConfig(),
	}
}

// stdout is where summaries go (a variable so tests can capture it).
var stdout io.Writer = os.Stdout

// Validate checks the whole configuration (cli calls it before run, so a bad value is exit
// status 2 before the model loads or any connection is made).
func (c *Config) Validate() error {
	// cuda: is checked whatever the backend: a config for a GPU node must validate on a CPU-only
	// build too (whether this binary has the backend is checked when it is opened, still exit
	// status 2), and a bad value should not wait for the day the backend is switched.
	errs := []error{c.Config.Validate(), c.Kafka.Validate(), c.Parallel.Validate(c.Backend, c.Checkpoint.DType), c.CUDA.Validate()}
	if c.Backend != "cpu" && c.Backend != "cuda" {
		errs = append(errs, fmt.Errorf("backend %q: want cpu or cuda", c.Backend))
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("consumer_group: required"))
	}
	switch c.Reload.Backend {
	case "none", "":
	case llm.BackendSGLang, llm.BackendVLLM:
		if len(c.Reload.Endpoints) == 0 {
			errs = append(errs, fmt.Errorf("reload.endpoints: at least one server to reload with reload.backend=%s", c.Reload.Backend))
		}
	default:
		errs = append(errs, fmt.Errorf("reload.backend %q: want none, sglang or vllm", c.Reload.Backend))
	}
	if err := llm.ValidateReloadMode(c.Reload.Mode); err != nil {
		errs = append(errs, err)
	} else if c.Reload.Mode == llm.ReloadIPC && c.Reload.Backend == llm.BackendVLLM {
		errs = append(errs, errors.New("reload.mode=ipc: vLLM servers reload from disk only (reload.mode=disk or auto)"))
	} else if c.Reload.Mode == llm.ReloadDistributed && c.Reload.Backend == llm.BackendVLLM {
		errs = append(errs, errors.New("reload.mode=distributed: vLLM servers reload from disk only (reload.mode=disk or auto)"))
	}
	errs = append(errs, c.Reload.Sync.validate(c.Reload.Mode))
	errs = append(errs, c.Model.Validate())
	return errors.Join(errs...)
}

// ConfigNotes says where the τ² task splits resolve (--print-config), as run will resolve them.
func (c *Config) ConfigNotes() []string {
	if !c.Admission.Enabled {
		return nil
	}
	return []string{cli.DataNote("data_dir", c.DataDir)}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sft" {
		sftMain(os.Args[2:])
		return
	}
	cfg := DefaultConfig()
	cli.Main(cli.App{Name: "tau2-trainer", Usage: usage, MetricsAddr: ":9402"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, rt, &cfg)
	})
}

// topology is the trainer's part of cfg that opening its backend needs (trainer/topology).
func (c *Config) topology(rt *cli.Runtime) topology.Settings {
	return topology.Settings{Backend: c.Backend, Options: backends.Options{CUDA: c.CUDA}, Model: c.Model, Parallel: c.Parallel,
		CheckpointDir: c.Checkpoint.Dir, Keep: c.Checkpoint.Keep, StartFresh: c.Checkpoint.StartFresh, DType: c.Checkpoint.DType,
		Job: c.ConsumerGroup, Log: rt.Log}
}

// settingsUsage makes topology's unusable settings (a backend this binary lacks, say) exit status 2.
func settingsUsage(err error) error {
	if errors.Is(err, topology.ErrSettings) {
		return cli.Usage(err)
	}
	return err
}

// runFollower is tau2-trainer on a host other than 0: no Kafka, no admission, no publishing. It
// joins the leader (topology.OpenFollower) and runs its updates until the leader says goodbye
// (exit 0) or something fails.
func runFollower(ctx context.Context, rt *cli.Runtime, cfg *Config) error {
	g, fl, err := topology.OpenFollower(ctx, cfg.topology(rt))
	if err != nil {
		return settingsUsage(err)
	}
	defer fl.Close()
	defer g.Close()
	m, err := step.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	rt.Ready()
	err = step.Follow(ctx, g, fl, m, rt.Log)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// admissionTasks loads the task splits admission cycles through, from data_dir or lib/assets'
// order ($TAU2_DATA_DIR, ../shared/tau2-data, the cache, a pinned download).
func admissionTasks(cfg *Config) ([]admission.Task, error) {
	dataDir, err := data.Dir(cfg.DataDir)
	if err != nil {
		err = fmt.Errorf("admission needs the τ² task splits (set data_dir, or admission.enabled=false): %w", err)
		if errors.Is(err, assets.ErrNotFound) {
			return nil, cli.Usage(err)
		}
		return nil, err
	}
	return admission.LoadTasks(dataDir, cfg.Admission.Tasks)
}

func run(ctx context.Context, rt *cli.Runtime, cfg *Config) (err error) {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	if cfg.Parallel.Follower() {
		return runFollower(ctx, rt, cfg)
	}
	// The task splits are resolved before the model loads, so a missing data directory fails in
	// seconds with what to set (exit status 2), not after minutes of loading.
	var tasks []admission.Task
	if cfg.Admission.Enabled {
		if tasks, err = admissionTasks(cfg); err != nil {
			return err
		}
	}
	var be gpu.Backend
	var resume *checkpoint.State
	var leader *feed.Leader
	if cfg.Parallel.Leader() {
		be, resume, leader, err = topology.OpenLeader(ctx, cfg.topology(rt))
	} else {
		be, resume, err = topology.Open(cfg.topology(rt))
	}
	if err != nil {
		return settingsUsage(err)
	}
	defer be.Close()
	if leader != nil {
		defer func() {
			if err == nil {
				leader.Close() // a clean shutdown: the followers exit with success
			} else {
				leader.Drop() // the followers fail too, so every host restarts
			}
		}()
	}

	// A wrong SASL password would otherwise surface as "unexpected EOF" or a silent retry loop.
	if err := tkafka.CheckAuth(ctx, cfg.Kafka); err != nil {
		return err
	}
	km, err := tkafka.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	src, err := kafkaio.NewSource(cfg.Kafka, cfg.ConsumerGroup, km)
	if err != nil {
		return err
	}
	src.Log = rt.Log
	defer src.Close()
	pub, err := kafkaio.NewPublisher(cfg.Kafka, km)
	if err != nil {
		return err
	}
	defer pub.Close()

	d := step.Deps{Backend: be, Source: src, Versions: pub, Requests: pub, Log: rt.Log, Feed: leader}
	if cfg.Admission.Enabled {
		if d.Admission, err = admission.New(cfg.Admission, tasks, cfg.Group.Size, cfg.BatchSize, cfg.MaxHeadOffpolicyness); err != nil {
			return err
		}
	}
	switch cfg.Reload.Backend {
	case "none", "":
	case llm.BackendSGLang, llm.BackendVLLM:
		_, reloader, err := llm.NewPolicy(llm.PolicyConfig{Backend: cfg.Reload.Backend, Model: cfg.Reload.Model, Endpoints: cfg.Reload.Endpoints}, rt.Registry)
		if err != nil {
			return err
		}
		if reloader, err = withReloadMode(reloader, cfg.Reload.Mode, be, rt.Log); err != nil {
			return err
		}
		if reloader, err = withWeightSync(reloader, cfg.Reload, be, cfg.Backend == "cpu", cfg.CUDA.Device, rt.Log); err != nil {
			return err
		}
		d.Reloader = reloader
	default:
		return fmt.Errorf("%w: reload.backend %q: want none, sglang or vllm", cli.ErrUsage, cfg.Reload.Backend)
	}
	if cfg.Model.Path != "" {
		// A fresh start reloads the servers from model.path under its initial version before it
		// issues a request (step.Deps.InitialWeights); the servers need an absolute path.
		if d.InitialWeights, err = filepath.Abs(cfg.Model.Path); err != nil {
			return fmt.Errorf("model.path: %w", err)
		}
	}
	if d.Metrics, err = step.NewMetrics(rt.Registry); err != nil {
		return err
	}
	tr, err := step.New(cfg.Config, d)
	if err != nil {
		return err
	}
	if resume != nil {
		if err := tr.Restore(*resume); err != nil {
			return err
		}
	}
	rt.Ready()
	err = tr.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
