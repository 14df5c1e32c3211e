package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/dp"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
	"tau2rl/trainer/step"

	"tau2rl/cmd/internal/cli"
)

// ParallelConfig turns on data parallelism (gpu/dp, docs/MULTIGPU.md): one process drives every
// GPU of its host, one goroutine per GPU, and stays one member of the trajectories consumer group.
type ParallelConfig struct {
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

// enabled reports whether the trainer runs a dp.Group.
func (p ParallelConfig) enabled() bool { return len(p.Devices) > 0 || p.Ranks > 1 || p.Hosts > 1 }

// multiHost reports whether the world spans several hosts.
func (p ParallelConfig) multiHost() bool { return p.Hosts > 1 }

// leader reports whether this process is host 0 of several.
func (p ParallelConfig) leader() bool { return p.multiHost() && p.HostRank == 0 }

// follower reports whether this process is a host other than 0.
func (p ParallelConfig) follower() bool { return p.multiHost() && p.HostRank > 0 }

// validate checks the parallel settings against the backend and the checkpoint dtype.
func (p ParallelConfig) validate(backend, dtype string) error {
	switch {
	case len(p.Devices) > 0 && dtype != string(gpu.BF16):
		return fmt.Errorf("parallel.devices needs checkpoint.dtype bfloat16 (got %q): a CUDA rank holds its weights whole only in bf16, the fp32 masters are in the sharded optimizer state", dtype)
	case p.ShardParameters && !p.enabled():
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
	if p.multiHost() {
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

// rankCount is the number of local ranks.
func (p ParallelConfig) rankCount() int {
	if len(p.Devices) > 0 {
		return len(p.Devices)
	}
	return max(p.Ranks, 1)
}

// openParallel builds one backend per local rank with build (concurrently: each loads the same
// weights onto its own GPU), joins them through the backend's communicator and returns the
// data-parallel group; the caller restores a checkpoint's optimizer state into it (shards of any
// world size, or a one-GPU optimizer.safetensors).
func openParallel(cfg *Config, rt *cli.Runtime, f backendFactory, build func(rank int) (gpu.Backend, error), hw *hostWorld) (gpu.Backend, error) {
	if f.comms == nil || (hw != nil && f.hostComms == nil) {
		return nil, fmt.Errorf("%w: backend %q has no collectives for data parallelism on this many hosts", cli.ErrUsage, cfg.Backend)
	}
	bes, err := dp.BuildRanks(cfg.Parallel.rankCount(), build)
	if err != nil {
		return nil, err
	}
	closeAll := func() {
		for _, be := range bes {
			be.Close()
		}
	}
	var comms []collective.Comm
	if hw != nil {
		comms, err = f.hostComms(cfg, hw.id, hw.firstRank, hw.world)
	} else {
		comms, err = f.comms(cfg)
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	g, err := dp.New(bes, comms, dp.Options{ShardParameters: cfg.Parallel.ShardParameters})
	if err != nil {
		closeAll()
		for _, c := range comms {
			c.Close()
		}
		return nil, err
	}
	level := dp.ShardOptimizer
	if cfg.Parallel.ShardParameters {
		level = dp.ShardParameters
	}
	if m, err := dp.MemoryModel(g.Config(), g.Config().NumParams(), cfg.Backend, g.World(), level); err == nil {
		rt.Log.Info("data parallel", "ranks", g.World(), "local_ranks", g.LocalRanks(), "devices", cfg.Parallel.Devices,
			"param_optimizer_bytes_per_rank", m.Bytes, "bytes_per_param", m.BytesPerParam())
	}
	return g, nil
}

// localComms is the in-process communicator of the cpu backend's ranks.
func localComms(c *Config) ([]collective.Comm, error) {
	return collective.NewLocal(c.Parallel.rankCount())
}

// hostWorld places this process's ranks in a world spanning several hosts.
type hostWorld struct {
	id        []byte // the collective's unique id (NCCL), made by the leader
	firstRank int    // global rank of the first local rank: host_rank × local ranks
	world     int    // hosts × local ranks
}

func (p ParallelConfig) hostWorld(id []byte) *hostWorld {
	n := p.rankCount()
	return &hostWorld{id: id, firstRank: p.HostRank * n, world: p.Hosts * n}
}

// feedOptions are the step feed's options; Settings holds what every host must share, so a
// follower started with another model or rank count is refused at the handshake.
func feedOptions(c *Config) feed.Options {
	p := c.Parallel
	settings := fmt.Sprintf("backend=%s local_ranks=%d hosts=%d model.path=%q model.config=%q model.seed=%d checkpoint.dir=%q",
		c.Backend, p.rankCount(), p.Hosts, c.Model.Path, c.Model.Config, c.Model.Seed, c.Checkpoint.Dir)
	return feed.Options{AckTimeout: p.feedTimeout(), Settings: settings}
}

func (p ParallelConfig) feedTimeout() time.Duration {
	if p.FeedTimeout > 0 {
		return p.FeedTimeout
	}
	return 10 * time.Minute
}

// openLeader is openBackend on host 0 of several: it makes the collective's unique id, waits on
// parallel.feed_addr for every follower host, welcomes each with the checkpoint the job resumes
// from and the id, joins the world, and restores the optimizer state on every host. The job
// name of the feed is consumer_group (one trainer job per consumer group).
func openLeader(ctx context.Context, cfg *Config, rt *cli.Runtime) (gpu.Backend, *checkpoint.State, *feed.Leader, error) {
	f, err := factory(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if f.commID == nil || f.hostComms == nil {
		return nil, nil, nil, fmt.Errorf("%w: backend %q cannot train across hosts", cli.ErrUsage, cfg.Backend)
	}
	m, dir, st, found, err := latestCheckpoint(cfg, rt)
	if err != nil {
		return nil, nil, nil, err
	}
	welcome := ""
	if found {
		if welcome, err = filepath.Abs(dir); err != nil {
			return nil, nil, nil, err
		}
	}
	id, err := f.commID(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ln, err := net.Listen("tcp", cfg.Parallel.FeedAddr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("step feed: %w", err)
	}
	rt.Log.Info("waiting for the follower hosts", "feed_addr", cfg.Parallel.FeedAddr, "hosts", cfg.Parallel.Hosts, "timeout", cfg.Parallel.feedTimeout())
	actx, cancel := context.WithTimeout(ctx, cfg.Parallel.feedTimeout())
	l, err := feed.Accept(actx, ln, cfg.ConsumerGroup, cfg.Parallel.Hosts, welcome, id, feedOptions(cfg))
	cancel()
	if err != nil {
		return nil, nil, nil, err
	}
	be, err := buildBackend(cfg, rt, f, dir, found, cfg.Parallel.hostWorld(id))
	if err != nil {
		l.Drop() // the followers fail too (no goodbye), so a supervisor restarts every host
		return nil, nil, nil, err
	}
	if !found {
		return be, nil, l, nil
	}
	restored, err := step.LoadOptimizerHosts(m, dir, st, be.(*dp.Group), l)
	if err != nil {
		l.Drop()
		be.Close()
		return nil, nil, nil, fmt.Errorf("resume from %s: %w", dir, err)
	}
	rt.Log.Info("resuming", "checkpoint", dir, "version", st.Version, "step", st.Step, "optimizer_state", restored, "hosts", cfg.Parallel.Hosts)
	return be, &st, l, nil
}

// runFollower is tau2-trainer on a host other than 0: no Kafka, no admission, no publishing. It
// connects to the leader's step feed (retrying until the leader listens), builds its local ranks
// from the checkpoint the leader names (or from its own model settings on a fresh start, which
// must be the leader's), joins the world and runs the leader's updates until the leader says
// goodbye (exit 0) or something fails.
func runFollower(ctx context.Context, rt *cli.Runtime, cfg *Config) error {
	f, err := factory(cfg)
	if err != nil {
		return err
	}
	if f.hostComms == nil {
		return fmt.Errorf("%w: backend %q cannot train across hosts", cli.ErrUsage, cfg.Backend)
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.Parallel.feedTimeout())
	fl, err := feed.Dial(dctx, cfg.Parallel.FeedAddr, cfg.ConsumerGroup, cfg.Parallel.HostRank, time.Second, feedOptions(cfg))
	cancel()
	if err != nil {
		return err
	}
	defer fl.Close()
	dir := fl.Welcome.Dir
	rt.Log.Info("joined the leader", "feed_addr", cfg.Parallel.FeedAddr, "host_rank", cfg.Parallel.HostRank, "resume_from", dir)
	be, err := buildBackend(cfg, rt, f, dir, dir != "", cfg.Parallel.hostWorld(fl.Welcome.CommID))
	if err != nil {
		return err
	}
	defer be.Close()
	m, err := step.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	rt.Ready()
	err = step.Follow(ctx, be.(*dp.Group), fl, m, rt.Log)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// hubComms joins this host's cpu ranks to the leader's TCP hub, whose address is the id.
func hubComms(c *Config, id []byte, firstRank, world int) ([]collective.Comm, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Parallel.feedTimeout())
	defer cancel()
	comms := make([]collective.Comm, 0, c.Parallel.rankCount())
	for r := range c.Parallel.rankCount() {
		cm, err := collective.DialHub(ctx, string(id), c.ConsumerGroup, firstRank+r, world, 100*time.Millisecond)
		if err != nil {
			for _, x := range comms {
				x.Close()
			}
			return nil, err
		}
		comms = append(comms, cm)
	}
	return comms, nil
}

// serveHub starts the TCP hub of a cpu world spanning several hosts in the leader's process and
// returns its address as the followers reach it (feed_addr's host, the hub's own port). The hub
// ends when the ranks leave.
func serveHub(c *Config) ([]byte, error) {
	host, _, err := net.SplitHostPort(c.Parallel.FeedAddr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("collective hub: %w", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	world := c.Parallel.Hosts * c.Parallel.rankCount()
	go func() {
		// The ranks connect once the followers are welcomed and have built their backends.
		ctx, cancel := context.WithTimeout(context.Background(), 2*c.Parallel.feedTimeout())
		defer cancel()
		collective.ServeHub(ctx, ln, c.ConsumerGroup, world)
	}()
	return []byte(net.JoinHostPort(host, port)), nil
}
