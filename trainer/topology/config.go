package topology

import (
	"fmt"
	"net"
	"time"

	"tau2rl/gpu"
	"tau2rl/lib/required"
)

// Model says where the initial weights come from when no checkpoint exists yet.
type Model struct {
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

// Validate requires a starting point: model.path or model.config.
func (m Model) Validate() error {
	if m.Path == "" && m.Config == "" {
		return fmt.Errorf("model.path or model.config: %w (the starting point when the checkpoint directory holds none: "+
			"model.path=/models/Qwen3-1.7B, a Hugging Face Qwen3 checkpoint; or model.config=deploy/models/qwen3-tiny/config.json, "+
			"random weights of a tiny Qwen3 with the real vocabulary, for smoke runs)", required.ErrMissing)
	}
	return nil
}

// Parallel turns on data parallelism (gpu/dp, docs/MULTIGPU.md): one process drives every GPU of
// its host, one goroutine per GPU, and stays one member of the trajectories consumer group.
type Parallel struct {
	// Devices are the CUDA device ordinals this process trains on, one data-parallel rank each
	// (backend cuda; NCCL between them). Empty: one GPU, cuda.device, no data parallelism.
	Devices []int `yaml:"devices"`
	// Ranks is the number of in-process ranks of the cpu backend (goroutines, collectives in
	// memory): the same code path as several GPUs, for smoke runs and tests. 0 or 1: none.
	Ranks int `yaml:"ranks"`
	// ShardParameters also shards the working weights (ZeRO-3: each layer gathered right before
	// use). Only the cpu backend implements it so far (docs/MULTIGPU.md). CUDA ranks shard the
	// optimizer state: 1.7B fits any count of 80 GB GPUs, 8B eight of them (7.5 B/param) or four
	// H200s (9 B/param; measured, 90 GB per GPU), not four 80 GB ones. Default false.
	ShardParameters bool `yaml:"shard_parameters"`
	// Hosts is the number of hosts of the world, each running one tau2-trainer with the same
	// model, parallel and actor settings and the same local rank count. Default 1. Host 0 (the
	// leader) is the normal trainer (Kafka, admission, checkpoints, offsets); hosts 1 … Hosts−1
	// (followers) take each update's inputs from it over the step feed (trainer/feed) and write
	// their optimizer shards into its checkpoint directory, which every host must see at the same
	// path (a shared file system). Backend cuda: NCCL across hosts; cpu: parallel.ranks ranks per
	// host (default 1) joined by a TCP hub in the leader's process (gpu/collective ServeHub), for
	// small models and tests. docs/MULTIGPU.md, "Several hosts".
	Hosts int `yaml:"hosts"`
	// HostRank is this host's rank in [0, Hosts): its ranks are global ranks
	// HostRank·local … (HostRank+1)·local − 1. Default 0.
	HostRank int `yaml:"host_rank"`
	// FeedAddr is the leader's step-feed address (host:port): the leader listens on it, the
	// followers dial it (retrying until the leader is up). Required when Hosts > 1. The NCCL
	// unique id travels in the feed's welcome, so no other port is needed.
	FeedAddr string `yaml:"feed_addr"`
	// FeedTimeout bounds how long the leader waits for every follower to connect at start, and
	// a follower for the leader; how long one update (or restore) may take on the leader before
	// it gives up on hosts that never join its collectives (a stuck host: NCCL would wait
	// forever), so it must exceed the longest step; and how long the leader waits for a
	// follower's acknowledgement after its own part. Default 10m.
	FeedTimeout time.Duration `yaml:"feed_timeout"`
}

// Enabled reports whether the trainer runs a dp.Group.
func (p Parallel) Enabled() bool { return len(p.Devices) > 0 || p.Ranks > 1 || p.Hosts > 1 }

// MultiHost reports whether the world spans several hosts.
func (p Parallel) MultiHost() bool { return p.Hosts > 1 }

// Leader reports whether this process is host 0 of several.
func (p Parallel) Leader() bool { return p.MultiHost() && p.HostRank == 0 }

// Follower reports whether this process is a host other than 0.
func (p Parallel) Follower() bool { return p.MultiHost() && p.HostRank > 0 }

// Validate checks the parallel settings against the backend and the checkpoint dtype.
func (p Parallel) Validate(backend, dtype string) error {
	switch {
	case len(p.Devices) > 0 && dtype != string(gpu.BF16):
		return fmt.Errorf("parallel.devices needs checkpoint.dtype bfloat16 (got %q): a CUDA rank holds its weights whole only in bf16, the fp32 masters are in the sharded optimizer state", dtype)
	case p.ShardParameters && !p.Enabled():
		return fmt.Errorf("parallel.shard_parameters needs parallel.devices or parallel.ranks")
	case p.Hosts < 0 || p.Ranks < 0 || p.FeedTimeout < 0:
		return fmt.Errorf("parallel.hosts %d, parallel.ranks %d and parallel.feed_timeout %v must be ≥ 0", p.Hosts, p.Ranks, p.FeedTimeout)
	case p.HostRank < 0 || p.HostRank >= max(p.Hosts, 1):
		return fmt.Errorf("parallel.host_rank %d outside [0, parallel.hosts=%d)", p.HostRank, max(p.Hosts, 1))
	case len(p.Devices) > 0 && backend != "cuda":
		return fmt.Errorf("parallel.devices is for backend cuda (backend is %q; the cpu backend takes parallel.ranks)", backend)
	case p.Ranks > 1 && backend != "cpu":
		return fmt.Errorf("parallel.ranks is for backend cpu (backend is %q; cuda takes parallel.devices)", backend)
	}
	if p.MultiHost() {
		switch {
		case backend == "cuda" && len(p.Devices) == 0:
			return fmt.Errorf("parallel.hosts %d needs parallel.devices (this host's GPUs, the same count on every host)", p.Hosts)
		case p.ShardParameters:
			return fmt.Errorf("parallel.shard_parameters with parallel.hosts > 1 is not supported: saving and plain passes need every rank in one process")
		case p.FeedAddr == "":
			return fmt.Errorf("parallel.hosts %d needs parallel.feed_addr, the leader's (host 0's) step-feed address host:port", p.Hosts)
		}
		if _, port, err := net.SplitHostPort(p.FeedAddr); err != nil || port == "" {
			return fmt.Errorf("parallel.feed_addr %q: want host:port (%v)", p.FeedAddr, err)
		}
	}
	seen := map[int]bool{}
	for _, d := range p.Devices {
		if d < 0 || seen[d] {
			return fmt.Errorf("parallel.devices %v: each device once, ordinals ≥ 0", p.Devices)
		}
		seen[d] = true
	}
	return nil
}

// RankCount is the number of local ranks.
func (p Parallel) RankCount() int {
	if len(p.Devices) > 0 {
		return len(p.Devices)
	}
	return max(p.Ranks, 1)
}

// feedTimeout is FeedTimeout with its default.
func (p Parallel) feedTimeout() time.Duration {
	if p.FeedTimeout > 0 {
		return p.FeedTimeout
	}
	return 10 * time.Minute
}
