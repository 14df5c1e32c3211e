package kafkaio_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/lib/stream"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
	"tau2rl/trainer/admission"
	"tau2rl/trainer/kafkaio"
	"tau2rl/trainer/step"
	"tau2rl/trainer/trajtest"
)

type reloads struct {
	mu       sync.Mutex
	versions []int64
}

func (r *reloads) LoadWeights(_ context.Context, _ string, v int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions = append(r.versions, v)
	return nil
}

// fakeProducers answers every rollout request with a group of synthetic trajectories echoing the
// request id and the request's policy version, one Kafka message per trajectory, as tau2-producer
// would.
func fakeProducers(ctx context.Context, t *testing.T, cfg tkafka.Config) error {
	r, err := tkafka.NewGroupReader(cfg, "producers", []string{cfg.Topics.RolloutRequests}, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := tkafka.NewWriter(cfg, cfg.Topics.Trajectories, nil)
	if err != nil {
		return err
	}
	defer w.Close()
	seed := uint64(100)
	for {
		msg, err := r.Fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var req schemas.RolloutRequest
		if err := schemas.UnframeControl(msg.Value, stream.HeaderMap(msg), &req); err != nil {
			return err
		}
		o := trajtest.Default()
		o.Domain, o.Split, o.RequestID, o.Version = req.Domain, req.Split, req.RequestID, req.PolicyVersion
		seed++
		trajs, err := trajtest.Group(o, req.TaskID, seed, trajtest.Rewards(req.GroupSize))
		if err != nil {
			return err
		}
		for _, tr := range trajs {
			f, err := schemas.FrameTrajectories(tr)
			if err != nil {
				return err
			}
			if err := w.PublishFramed(ctx, f); err != nil {
				return err
			}
		}
		if err := r.Commit(ctx, msg); err != nil {
			return err
		}
	}
}

// TestClosedLoopThroughEmbeddedBroker runs the whole loop on the embedded Kafka broker: the
// trainer issues rollout requests under admission control, fake producers answer them, the
// trainer groups, trains the tiny model, checkpoints, commits its offsets, reloads and publishes
// new versions; a corrupt message goes to dead letters.
func TestClosedLoopThroughEmbeddedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded broker round trip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := embedded.Start(embedded.Config{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kcfg := tkafka.DefaultConfig()
	kcfg.Brokers = []string{b.Addr()}
	kcfg.Partitions = 2
	kcfg.Reader.SessionTimeout = 6 * time.Second
	kcfg.Reader.HeartbeatInterval = 500 * time.Millisecond
	kcfg.Reader.MaxWait = 50 * time.Millisecond
	if err := tkafka.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	// A message no one can decode.
	w, err := tkafka.NewWriter(kcfg, kcfg.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, tkafka.Message{Key: []byte("0"), Value: []byte("not arrow")}); err != nil {
		t.Fatal(err)
	}
	w.Close()

	pctx, stopProducers := context.WithCancel(ctx)
	perr := make(chan error, 1)
	go func() { perr <- fakeProducers(pctx, t, kcfg) }()

	src, err := kafkaio.NewSource(kcfg, kafkaio.DefaultGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pub, err := kafkaio.NewPublisher(kcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	cfg := step.DefaultConfig()
	cfg.BatchSize = 2
	cfg.MaxSteps = 3
	cfg.Group.Size = 4
	cfg.Actor.MBSpec.MaxTokensPerMB = 512
	cfg.Checkpoint.Dir = t.TempDir()
	cfg.Checkpoint.DType = string(gpu.F32)
	cfg.Tick = 20 * time.Millisecond
	tasks := []admission.Task{{Domain: "airline", Split: "train", ID: "0"}, {Domain: "airline", Split: "train", ID: "1"}, {Domain: "airline", Split: "train", ID: "3"}}
	adm, err := admission.New(cfg.Admission, tasks, cfg.Group.Size, cfg.BatchSize, cfg.MaxHeadOffpolicyness)
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.NewRandom(gpu.TinyConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	rel := &reloads{}
	m, _ := step.NewMetrics(nil)
	tr, err := step.New(cfg, step.Deps{Backend: be, Source: src, Reloader: rel, Versions: pub, Requests: pub, Admission: adm, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	stopProducers()
	if err := <-perr; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("producers: %v", err)
	}
	if tr.Version() != 3 {
		t.Fatalf("version %d, want 3", tr.Version())
	}
	// The fresh trainer first serves its initial weights as version 0 (its random initialisation,
	// written to checkpoint.dir/initial), then each step's version.
	if !slices.Equal(rel.versions, []int64{0, 1, 2, 3}) {
		t.Fatalf("reloads %v, want [0 1 2 3]", rel.versions)
	}

	// Policy versions 0..3 are on the control topic.
	vr, err := tkafka.NewGroupReader(kcfg, "check-versions", []string{kcfg.Topics.PolicyVersions}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer vr.Close()
	var got []int64
	for len(got) < 4 {
		msg, err := vr.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var pv schemas.PolicyVersion
		if err := schemas.UnframeControl(msg.Value, stream.HeaderMap(msg), &pv); err != nil {
			t.Fatal(err)
		}
		got = append(got, pv.Version)
	}
	if !slices.Equal(got, []int64{0, 1, 2, 3}) {
		t.Fatalf("published versions %v", got)
	}

	// Offsets were committed after the checkpoints, never past what was consumed.
	admin, err := tkafka.NewAdmin(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := admin.CommittedOffsets(ctx, kafkaio.DefaultGroup, kcfg.Topics.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	end, err := admin.EndOffsets(ctx, kcfg.Topics.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for p, off := range committed {
		if off > end[p] {
			t.Fatalf("partition %d committed %d past its end %d", p, off, end[p])
		}
		if off > 0 {
			sum += off
		}
	}
	// 3 steps × 2 groups × 4 trajectories were trained, plus the dead letter.
	if sum < 3*2*4 {
		t.Fatalf("committed %d messages in total (%v), want ≥ 24", sum, committed)
	}

	// The corrupt message is in dead letters.
	dr, err := tkafka.NewGroupReader(kcfg, "check-dl", []string{kcfg.Topics.DeadLetters}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	dl, err := dr.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := tkafka.ParseDeadLetter(dl)
	if err != nil || string(dl.Value) != "not arrow" {
		t.Fatalf("dead letter %+v %q %v", info, dl.Value, err)
	}
}

// TestSourceLogsDeadLetters: a message the trainer cannot decode goes to dead letters with a log
// line naming it (it used to be dead-lettered silently).
func TestSourceLogsDeadLetters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := embedded.Start(embedded.Config{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kcfg := tkafka.DefaultConfig()
	kcfg.Brokers, kcfg.Partitions = []string{b.Addr()}, 1
	kcfg.Reader.SessionTimeout, kcfg.Reader.HeartbeatInterval, kcfg.Reader.MaxWait = 6*time.Second, 500*time.Millisecond, 50*time.Millisecond
	if err := tkafka.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	w, err := tkafka.NewWriter(kcfg, kcfg.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, tkafka.Message{Key: []byte("task-7"), Value: []byte("not arrow")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	src, err := kafkaio.NewSource(kcfg, kafkaio.DefaultGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var logged bytes.Buffer
	src.Log = slog.New(slog.NewTextHandler(&logged, nil))
	msg, err := src.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Trajectories) != 0 {
		t.Fatalf("decoded %d trajectories from garbage", len(msg.Trajectories))
	}
	if s := logged.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "dead-lettering") || !strings.Contains(s, "key=task-7") {
		t.Errorf("no warning for the dead letter: %q", s)
	}
}
