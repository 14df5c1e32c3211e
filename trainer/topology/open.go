package topology

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/backends"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/dp"
	"tau2rl/lib/logs"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
	"tau2rl/trainer/step"
)

// Settings are what opening the backend needs: the trainer's backend, model, parallel and
// checkpoint settings.
type Settings struct {
	// Backend names the backend in gpu/backends (cpu, cuda).
	Backend string
	// Options tune it (cuda.*); a local rank's Options.CUDA.Device is its parallel.devices entry.
	Options backends.Options
	// Model is the starting point when CheckpointDir holds no checkpoint.
	Model Model
	// Parallel lays out the ranks.
	Parallel Parallel
	// CheckpointDir, Keep, StartFresh and DType are checkpoint.*: where to resume from, how many
	// checkpoints the manager keeps, whether an unreadable directory may be started over, and
	// the saved weights' dtype (parallel.devices needs bfloat16).
	CheckpointDir string
	Keep          int
	StartFresh    bool
	DType         string
	// Job names the training job (the consumer group): the step feed's and the cpu hub's
	// handshakes refuse hosts of another job.
	Job string
	// Log receives the progress (nil discards).
	Log *slog.Logger
}

// Open resumes from the latest checkpoint (weights, then optimizer state), or starts from
// model.path or a random init, on one host (the leader of several is OpenLeader, the others
// OpenFollower). The state is nil when nothing was resumed.
func Open(s Settings) (gpu.Backend, *checkpoint.State, error) {
	log := logs.OrDiscard(s.Log)
	b, err := s.backend()
	if err != nil {
		return nil, nil, err
	}
	if s.Parallel.MultiHost() {
		return nil, nil, fmt.Errorf("%w: parallel.hosts %d: this command runs on one host", ErrSettings, s.Parallel.Hosts)
	}
	m, dir, st, found, err := s.latestCheckpoint()
	if err != nil {
		return nil, nil, err
	}
	be, err := s.build(b, dir, found, nil)
	if err != nil {
		return be, nil, err
	}
	if !found {
		return be, numbering(st), nil
	}
	// The weights alone would restart AdamW from zero (and, from a bf16 checkpoint, from
	// rounded weights): restore the optimizer state so the run continues exactly.
	restored, err := m.LoadOptimizer(dir, st, be)
	if err != nil {
		be.Close()
		return nil, nil, fmt.Errorf("resume from %s: %w", dir, err)
	}
	log.Info("resuming", "checkpoint", dir, "version", st.Version, "step", st.Step, "optimizer_state", restored)
	return be, &st, nil
}

// numbering is what a start from the initial model restores: nothing, or after
// checkpoint.start_fresh past unreadable checkpoints the version and step to continue from
// (checkpoint.Manager.Resume), so the published versions never go backwards.
func numbering(st checkpoint.State) *checkpoint.State {
	if st.Version == 0 && st.Step == 0 {
		return nil
	}
	return &checkpoint.State{Version: st.Version, Step: st.Step}
}

// backend validates the parallel settings and returns the configured backend.
func (s *Settings) backend() (backends.Backend, error) {
	if err := s.Parallel.Validate(s.Backend, s.DType); err != nil {
		return backends.Backend{}, fmt.Errorf("%w: %v", ErrSettings, err)
	}
	b, err := backends.Get(s.Backend)
	if err != nil {
		return backends.Backend{}, fmt.Errorf("%w: %w", ErrSettings, err)
	}
	return b, nil
}

// latestCheckpoint finds the checkpoint to resume from under checkpoint.dir: the newest
// readable one (falling back past unreadable newer ones, logged). When checkpoint.dir holds
// checkpoints but none is readable it refuses to start (the reasons listed) unless
// checkpoint.start_fresh is set: starting over would publish version 1 after version N and
// commit offsets for a model that forgot its training (checkpoint.Manager.Resume).
func (s *Settings) latestCheckpoint() (*checkpoint.Manager, string, checkpoint.State, bool, error) {
	m := &checkpoint.Manager{Dir: s.CheckpointDir, Keep: s.Keep, Log: s.Log}
	dir, st, found, err := m.Resume(s.StartFresh)
	return m, dir, st, found, err
}

// hostWorld places this process's ranks in a world spanning several hosts.
type hostWorld struct {
	id        []byte // the collective's unique id (NCCL), made by the leader
	firstRank int    // global rank of the first local rank: host_rank × local ranks
	world     int    // hosts × local ranks
}

func (p Parallel) hostWorld(id []byte) *hostWorld {
	n := p.RankCount()
	return &hostWorld{id: id, firstRank: p.HostRank * n, world: p.Hosts * n}
}

// world is the backends.World of this process's ranks: this host alone (hw nil) or its block
// of a world spanning hosts.
func (s *Settings) world(hw *hostWorld) backends.World {
	n := s.Parallel.RankCount()
	w := backends.World{Devices: s.Parallel.Devices, Ranks: n, Size: n, Job: s.Job,
		Addr: s.Parallel.FeedAddr, Timeout: s.Parallel.feedTimeout()}
	if hw != nil {
		w.FirstRank, w.Size = hw.firstRank, hw.world
	}
	return w
}

// build builds the backend (every local rank's, joined into a dp.Group, under parallel.*)
// holding the weights of checkpoint dir when found, else model.path's or a random
// initialisation's; hw places the ranks in a world spanning several hosts (nil: this host only).
// The caller restores the optimizer state.
func (s *Settings) build(b backends.Backend, dir string, found bool, hw *hostWorld) (gpu.Backend, error) {
	log := logs.OrDiscard(s.Log)
	var err error
	// one makes the backend of local rank r (its own device under parallel.devices); weights
	// reads the same starting weights on the host, for ranks built as shards (Backend.Shard).
	var one func(o backends.Options) (gpu.Backend, error)
	var weights func() (*gpu.Weights, error)
	switch {
	case found:
		one = func(o backends.Options) (gpu.Backend, error) { return b.Load(dir, o) }
		weights = func() (*gpu.Weights, error) { return gpu.LoadWeights(dir) }
	case s.Model.Path != "":
		log.Info("starting from model", "path", s.Model.Path)
		one = func(o backends.Options) (gpu.Backend, error) { return b.Load(s.Model.Path, o) }
		weights = func() (*gpu.Weights, error) { return gpu.LoadWeights(s.Model.Path) }
	default:
		mc := gpu.TinyConfig()
		if s.Model.Config != "" {
			if mc, err = gpu.LoadConfig(s.Model.Config); err != nil {
				return nil, err
			}
		}
		log.Info("starting from random weights", "seed", s.Model.Seed, "layers", mc.NumHiddenLayers, "hidden", mc.HiddenSize)
		one = func(o backends.Options) (gpu.Backend, error) { return b.Random(mc, s.Model.Seed, o) }
		weights = func() (*gpu.Weights, error) { return gpu.NewRandomWeights(mc, s.Model.Seed) }
	}
	be, err := s.buildRanks(b, one, weights, hw)
	if err != nil && found {
		return nil, fmt.Errorf("resume from %s: %w", dir, err)
	}
	return be, err
}

// buildRanks builds the backend: one, or every local rank of a data-parallel group — as its
// shard from one host copy of the weights when the backend can (the whole optimizer state of
// 8B fits no GPU), else whole, for gpu/dp to shard.
func (s *Settings) buildRanks(b backends.Backend, one func(backends.Options) (gpu.Backend, error),
	weights func() (*gpu.Weights, error), hw *hostWorld) (gpu.Backend, error) {
	if !s.Parallel.Enabled() {
		return one(s.Options)
	}
	rankOptions := func(r int) backends.Options {
		o := s.Options
		if len(s.Parallel.Devices) > 0 {
			o.CUDA.Device = s.Parallel.Devices[r]
		}
		return o
	}
	rankBuild := func(r int) (gpu.Backend, error) { return one(rankOptions(r)) }
	if b.Shard != nil {
		w, err := weights()
		if err != nil {
			return nil, err
		}
		wd := s.world(hw)
		rankBuild = func(r int) (gpu.Backend, error) { return b.Shard(w, rankOptions(r), wd.FirstRank+r, wd.Size) }
	}
	return s.openParallel(b, rankBuild, hw)
}

// openParallel builds one backend per local rank with build (concurrently: each loads the same
// weights onto its own GPU), joins them through the backend's communicator and returns the
// data-parallel group; the caller restores a checkpoint's optimizer state into it (shards of any
// world size, or a one-GPU optimizer.safetensors).
func (s *Settings) openParallel(b backends.Backend, build func(rank int) (gpu.Backend, error), hw *hostWorld) (gpu.Backend, error) {
	if b.LocalComms == nil || (hw != nil && b.HostComms == nil) {
		return nil, fmt.Errorf("%w: backend %q has no collectives for data parallelism on this many hosts", ErrSettings, s.Backend)
	}
	bes, err := dp.BuildRanks(s.Parallel.RankCount(), build)
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
		comms, err = b.HostComms(s.world(hw), hw.id)
	} else {
		comms, err = b.LocalComms(s.world(nil))
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	g, err := dp.New(bes, comms, dp.Options{ShardParameters: s.Parallel.ShardParameters})
	if err != nil {
		closeAll()
		for _, c := range comms {
			c.Close()
		}
		return nil, err
	}
	level := dp.ShardOptimizer
	if s.Parallel.ShardParameters {
		level = dp.ShardParameters
	}
	if m, err := dp.MemoryModel(g.Config(), g.Config().NumParams(), s.Backend, g.World(), level); err == nil {
		logs.OrDiscard(s.Log).Info("data parallel", "ranks", g.World(), "local_ranks", g.LocalRanks(), "devices", s.Parallel.Devices,
			"param_optimizer_bytes_per_rank", m.Bytes, "bytes_per_param", m.BytesPerParam())
	}
	return g, nil
}

// feedOptions are the step feed's options; Settings holds what every host must share, so a
// follower started with another model or rank count is refused at the handshake.
func (s *Settings) feedOptions() feed.Options {
	p := s.Parallel
	settings := fmt.Sprintf("backend=%s local_ranks=%d hosts=%d model.path=%q model.config=%q model.seed=%d checkpoint.dir=%q",
		s.Backend, p.RankCount(), p.Hosts, s.Model.Path, s.Model.Config, s.Model.Seed, s.CheckpointDir)
	return feed.Options{AckTimeout: p.feedTimeout(), Settings: settings}
}

// OpenLeader is Open on host 0 of several: it makes the collective's unique id, waits on
// parallel.feed_addr for every follower host, welcomes each with the checkpoint the job resumes
// from and the id, joins the world, and restores the optimizer state on every host. The job
// name of the feed is Settings.Job (one trainer job per consumer group). The caller closes the
// leader after a clean run (the followers then exit with success) or drops it after a failure
// (they fail too, so a supervisor restarts every host).
func OpenLeader(ctx context.Context, s Settings) (gpu.Backend, *checkpoint.State, *feed.Leader, error) {
	log := logs.OrDiscard(s.Log)
	b, err := s.backend()
	if err != nil {
		return nil, nil, nil, err
	}
	if b.CommID == nil || b.HostComms == nil {
		return nil, nil, nil, fmt.Errorf("%w: backend %q cannot train across hosts", ErrSettings, s.Backend)
	}
	m, dir, st, found, err := s.latestCheckpoint()
	if err != nil {
		return nil, nil, nil, err
	}
	welcome := ""
	if found {
		if welcome, err = filepath.Abs(dir); err != nil {
			return nil, nil, nil, err
		}
	}
	hw := s.Parallel.hostWorld(nil)
	id, err := b.CommID(s.world(hw))
	if err != nil {
		return nil, nil, nil, err
	}
	hw.id = id
	ln, err := net.Listen("tcp", s.Parallel.FeedAddr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("step feed: %w", err)
	}
	log.Info("waiting for the follower hosts", "feed_addr", s.Parallel.FeedAddr, "hosts", s.Parallel.Hosts, "timeout", s.Parallel.feedTimeout())
	actx, cancel := context.WithTimeout(ctx, s.Parallel.feedTimeout())
	l, err := feed.Accept(actx, ln, s.Job, s.Parallel.Hosts, welcome, id, s.feedOptions())
	cancel()
	if err != nil {
		return nil, nil, nil, err
	}
	be, err := s.build(b, dir, found, hw)
	if err != nil {
		l.Drop() // the followers fail too (no goodbye), so a supervisor restarts every host
		return nil, nil, nil, err
	}
	if !found {
		return be, numbering(st), l, nil
	}
	restored, err := step.LoadOptimizerHosts(m, dir, st, be.(*dp.Group), l)
	if err != nil {
		l.Drop()
		be.Close()
		return nil, nil, nil, fmt.Errorf("resume from %s: %w", dir, err)
	}
	log.Info("resuming", "checkpoint", dir, "version", st.Version, "step", st.Step, "optimizer_state", restored, "hosts", s.Parallel.Hosts)
	return be, &st, l, nil
}

// OpenFollower is a host other than 0: it connects to the leader's step feed (retrying until
// the leader listens), builds its local ranks from the checkpoint the leader names (or from its
// own model settings on a fresh start, which must be the leader's) and joins the world. The
// caller runs the leader's updates on the group (step.Follow) and closes both.
func OpenFollower(ctx context.Context, s Settings) (*dp.Group, *feed.Follower, error) {
	b, err := s.backend()
	if err != nil {
		return nil, nil, err
	}
	if b.HostComms == nil {
		return nil, nil, fmt.Errorf("%w: backend %q cannot train across hosts", ErrSettings, s.Backend)
	}
	dctx, cancel := context.WithTimeout(ctx, s.Parallel.feedTimeout())
	fl, err := feed.Dial(dctx, s.Parallel.FeedAddr, s.Job, s.Parallel.HostRank, time.Second, s.feedOptions())
	cancel()
	if err != nil {
		return nil, nil, err
	}
	dir := fl.Welcome.Dir
	logs.OrDiscard(s.Log).Info("joined the leader", "feed_addr", s.Parallel.FeedAddr, "host_rank", s.Parallel.HostRank, "resume_from", dir)
	be, err := s.build(b, dir, dir != "", s.Parallel.hostWorld(fl.Welcome.CommID))
	if err != nil {
		fl.Close()
		return nil, nil, err
	}
	return be.(*dp.Group), fl, nil
}
