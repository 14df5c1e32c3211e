// Command tau2-trainer trains a Qwen3 policy with GRPO on scored τ²-bench trajectories from Kafka.
// It is wiring only; the work is in tau2rl/trainer/... (see trainer/step for the loop).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/cuda"
	"tau2rl/lib/assets"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/required"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/tau2/data"
	"tau2rl/trainer/admission"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
	"tau2rl/trainer/kafkaio"
	"tau2rl/trainer/step"

	"tau2rl/cmd/internal/cli"
)

const usage = `tau2-trainer — GRPO trainer for tool-using agents on τ²-bench (tau2rl)

Consumes scored trajectories (consumer group consumer_group), groups them by task, computes GRPO
advantages, packs the step's LLM calls into prefix trees, and runs the decoupled PPO update on the
model backend. Every checkpoint.every steps it saves checkpoints/v<N>/ (Hugging Face safetensors,
optimizer.safetensors with the AdamW state, trainer_state.json; atomically), commits the offsets
that checkpoint covers, reloads the inference servers (reload.backend) and publishes policy
version N. It issues rollout requests itself so
in-flight work never runs more than max_head_offpolicyness versions ahead (admission.*).

It resumes from the newest readable checkpoint in checkpoint.dir, optimizer state included, so the
run continues exactly as if it had not stopped (an unreadable newer one is skipped, and logged);
otherwise it starts from model.path (a Hugging Face Qwen3 checkpoint) or a random initialisation
of model.config (a config.json). One of the two is required: there is no default model (a shape
small enough for any machine could not hold Qwen3's 151,936-token vocabulary, so it could not
train on any real trajectory). If checkpoint.dir holds checkpoints but none is readable, it
refuses to start unless checkpoint.start_fresh=true.

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

// ModelConfig says where the initial weights come from when no checkpoint exists yet.
type ModelConfig struct {
	// Path is a Hugging Face checkpoint directory (config.json + *.safetensors). Empty: random
	// initialisation of Config.
	Path string `yaml:"path"`
	// Config is a config.json for random initialisation (deploy/models/qwen3-tiny/config.json:
	// smoke runs). Path or Config is required: no built-in shape holds Qwen3's vocabulary and still
	// fits a laptop, and a smaller vocabulary fails on the first real trajectory.
	Config string `yaml:"config"`
	// Seed seeds the random initialisation. Default 1.
	Seed uint64 `yaml:"seed"`
}

// ReloadConfig names the inference servers to reload after each checkpoint.
type ReloadConfig struct {
	// Backend is "none" (default: nothing to reload), "sglang" or "vllm".
	Backend string `yaml:"backend"`
	// Model is vLLM's served model name.
	Model string `yaml:"model"`
	// Endpoints are the servers (base_url, api_key, timeouts, retries).
	Endpoints []llm.EndpointConfig `yaml:"endpoints"`
}

// Config is the trainer's configuration. The training keys (batch_size, max_head_offpolicyness,
// group.*, actor.*, checkpoint.*, admission.*) are step.Config's, inline.
type Config struct {
	// Backend is "cpu" (default) or "cuda".
	Backend string `yaml:"backend"`
	// CUDA tunes the cuda backend.
	CUDA cuda.Options `yaml:"cuda"`
	// Model is the starting point when checkpoint.dir has no checkpoint.
	Model ModelConfig `yaml:"model"`
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
	Parallel ParallelConfig `yaml:"parallel"`

	step.Config `yaml:",inline"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Backend:       "cpu",
		CUDA:          cuda.DefaultOptions(),
		Model:         ModelConfig{Seed: 1},
		Kafka:         tkafka.DefaultConfig(),
		ConsumerGroup: kafkaio.DefaultGroup,
		Reload:        ReloadConfig{Backend: "none"},
		Config:        step.DefaultConfig(),
	}
}

// backendFactory builds a model backend; cuda_backend.go registers "cuda" in -tags cuda builds.
// comms makes the communicator of parallel.* for this backend's ranks (nil: no data parallelism).
type backendFactory struct {
	load   func(dir string, c *Config) (gpu.Backend, error)
	random func(mc gpu.Config, seed uint64, c *Config) (gpu.Backend, error)
	comms  func(c *Config) ([]collective.Comm, error)
	// commID makes the unique id of a world spanning several hosts (the leader sends it to the
	// followers in the step feed's welcome), and hostComms joins this host's ranks
	// firstRank … firstRank+len(devices)−1 of a world of the given size with it. Both nil: the
	// backend cannot train across hosts.
	commID    func(c *Config) ([]byte, error)
	hostComms func(c *Config, id []byte, firstRank, world int) ([]collective.Comm, error)
	// shard, when set, builds data-parallel rank `rank` of `world` directly from host weights
	// shared by all the process's ranks, never holding the whole optimizer state on one device
	// (cuda.NewShard: how an 8B rank fits an 80 GB GPU). Without it a rank is built whole and
	// gpu/dp shards it.
	shard func(w *gpu.Weights, c *Config, rank, world int) (gpu.Backend, error)
}

var backends = map[string]backendFactory{}

// backendNames lists the backends this binary was built with.
func backendNames() string { return strings.Join(slices.Sorted(maps.Keys(backends)), ", ") }

// stdout is where summaries go (a variable so tests can capture it).
var stdout io.Writer = os.Stdout

// Validate checks the whole configuration (cli calls it before run, so a bad value is exit
// status 2 before the model loads or any connection is made).
func (c *Config) Validate() error {
	// cuda: is checked whatever the backend: a config for a GPU node must validate on a CPU-only
	// build too (whether this binary has the backend is checked when it is opened, still exit
	// status 2), and a bad value should not wait for the day the backend is switched.
	errs := []error{c.Config.Validate(), c.Kafka.Validate(), c.Parallel.validate(c.Backend, c.Checkpoint.DType), c.CUDA.Validate()}
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
	errs = append(errs, c.Model.validate())
	return errors.Join(errs...)
}

// validate requires a starting point: model.path or model.config.
func (m ModelConfig) validate() error {
	if m.Path == "" && m.Config == "" {
		return fmt.Errorf("model.path or model.config: %w (the starting point when the checkpoint directory holds none: "+
			"model.path=/models/Qwen3-1.7B, a Hugging Face Qwen3 checkpoint; or model.config=deploy/models/qwen3-tiny/config.json, "+
			"random weights of a tiny Qwen3 with the real vocabulary, for smoke runs)", required.ErrMissing)
	}
	return nil
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

// openBackend resumes from the latest checkpoint (weights, then optimizer state), or starts from
// model.path or a random init. It is for one host (the leader of several is openLeader).
func openBackend(cfg *Config, rt *cli.Runtime) (gpu.Backend, *checkpoint.State, error) {
	f, err := factory(cfg)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Parallel.multiHost() {
		return nil, nil, fmt.Errorf("%w: parallel.hosts %d: this command runs on one host", cli.ErrUsage, cfg.Parallel.Hosts)
	}
	m, dir, st, found, err := latestCheckpoint(cfg, rt)
	if err != nil {
		return nil, nil, err
	}
	be, err := buildBackend(cfg, rt, f, dir, found, nil)
	if err != nil || !found {
		return be, nil, err
	}
	// The weights alone would restart AdamW from zero (and, from a bf16 checkpoint, from
	// rounded weights): restore the optimizer state so the run continues exactly.
	restored, err := m.LoadOptimizer(dir, st, be)
	if err != nil {
		be.Close()
		return nil, nil, fmt.Errorf("resume from %s: %w", dir, err)
	}
	rt.Log.Info("resuming", "checkpoint", dir, "version", st.Version, "step", st.Step, "optimizer_state", restored)
	return be, &st, nil
}

// factory validates the parallel settings and returns the configured backend's factory.
func factory(cfg *Config) (backendFactory, error) {
	if err := cfg.Parallel.validate(cfg.Backend, cfg.Checkpoint.DType); err != nil {
		return backendFactory{}, fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	f, ok := backends[cfg.Backend]
	if !ok {
		return backendFactory{}, fmt.Errorf("%w: backend %q is not available in this binary (have: %s; cuda needs -tags cuda)", cli.ErrUsage, cfg.Backend, backendNames())
	}
	return f, nil
}

// latestCheckpoint finds the checkpoint to resume from under checkpoint.dir: the newest
// readable one (falling back past unreadable newer ones, logged). When checkpoint.dir holds
// checkpoints but none is readable it refuses to start (exit status 1, the reasons listed)
// unless checkpoint.start_fresh is set: starting over would publish version 1 after version N
// and commit offsets for a model that forgot its training (checkpoint.Manager.Resume).
func latestCheckpoint(cfg *Config, rt *cli.Runtime) (*checkpoint.Manager, string, checkpoint.State, bool, error) {
	m := &checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: cfg.Checkpoint.Keep, Log: rt.Log}
	dir, st, found, err := m.Resume(cfg.Checkpoint.StartFresh)
	return m, dir, st, found, err
}

// buildBackend builds the backend (every local rank's, joined into a dp.Group, under
// parallel.*) holding the weights of checkpoint dir when found, else model.path's or a random
// initialisation's; hw places the ranks in a world spanning several hosts (nil: this host only).
// The caller restores the optimizer state.
func buildBackend(cfg *Config, rt *cli.Runtime, f backendFactory, dir string, found bool, hw *hostWorld) (gpu.Backend, error) {
	var err error
	// build makes the backend of local rank r (its own device under parallel.devices); weights
	// reads the same starting weights on the host, for ranks built as shards (factory.shard).
	var build func(c *Config) (gpu.Backend, error)
	var weights func() (*gpu.Weights, error)
	switch {
	case found:
		build = func(c *Config) (gpu.Backend, error) { return f.load(dir, c) }
		weights = func() (*gpu.Weights, error) { return gpu.LoadWeights(dir) }
	case cfg.Model.Path != "":
		rt.Log.Info("starting from model", "path", cfg.Model.Path)
		build = func(c *Config) (gpu.Backend, error) { return f.load(cfg.Model.Path, c) }
		weights = func() (*gpu.Weights, error) { return gpu.LoadWeights(cfg.Model.Path) }
	default:
		mc := gpu.TinyConfig()
		if cfg.Model.Config != "" {
			if mc, err = gpu.LoadConfig(cfg.Model.Config); err != nil {
				return nil, err
			}
		}
		rt.Log.Info("starting from random weights", "seed", cfg.Model.Seed, "layers", mc.NumHiddenLayers, "hidden", mc.HiddenSize)
		build = func(c *Config) (gpu.Backend, error) { return f.random(mc, cfg.Model.Seed, c) }
		weights = func() (*gpu.Weights, error) { return gpu.NewRandomWeights(mc, cfg.Model.Seed) }
	}
	be, err := openBuilt(cfg, rt, f, build, weights, hw)
	if err != nil && found {
		return nil, fmt.Errorf("resume from %s: %w", dir, err)
	}
	return be, err
}

// openBuilt builds the backend: one, or every local rank of a data-parallel group — as its
// shard from one host copy of the weights when the factory can (the whole optimizer state of
// 8B fits no GPU), else whole, for gpu/dp to shard.
func openBuilt(cfg *Config, rt *cli.Runtime, f backendFactory, build func(*Config) (gpu.Backend, error),
	weights func() (*gpu.Weights, error), hw *hostWorld) (gpu.Backend, error) {
	if !cfg.Parallel.enabled() {
		return build(cfg)
	}
	rankConfig := func(r int) *Config {
		c := *cfg
		if len(cfg.Parallel.Devices) > 0 {
			c.CUDA.Device = cfg.Parallel.Devices[r]
		}
		return &c
	}
	rankBuild := func(r int) (gpu.Backend, error) { return build(rankConfig(r)) }
	if f.shard != nil {
		w, err := weights()
		if err != nil {
			return nil, err
		}
		first, world := 0, cfg.Parallel.rankCount()
		if hw != nil {
			first, world = hw.firstRank, hw.world
		}
		rankBuild = func(r int) (gpu.Backend, error) { return f.shard(w, rankConfig(r), first+r, world) }
	}
	return openParallel(cfg, rt, f, rankBuild, hw)
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
	if cfg.Parallel.follower() {
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
	if cfg.Parallel.leader() {
		be, resume, leader, err = openLeader(ctx, cfg, rt)
	} else {
		be, resume, err = openBackend(cfg, rt)
	}
	if err != nil {
		return err
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
		d.Reloader = reloader
	default:
		return fmt.Errorf("%w: reload.backend %q: want none, sglang or vllm", cli.ErrUsage, cfg.Reload.Backend)
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
