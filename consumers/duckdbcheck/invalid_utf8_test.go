package duckdbcheck

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/consumers/archiver"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
)

// TestInvalidUTF8IsDeadLetteredAndArchiveStaysQueryable publishes trajectories
// with invalid UTF-8 in a task id, a message's content and a tool call's
// arguments between valid ones, runs the real archiver (schemas Parquet sink)
// over the embedded broker, and checks that the three bad records went to the
// dead-letter topic while every documented DuckDB query still runs over the
// archive. Before Trajectory.Validate checked UTF-8, the bad rows were
// archived and DuckDB refused the whole archive ("Invalid string encoding
// found in Parquet file").
func TestInvalidUTF8IsDeadLetteredAndArchiveStaysQueryable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the archiver over the embedded broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := embedded.Start(embedded.Config{DataDir: t.TempDir(), MinSessionTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	kc := tkafka.DefaultConfig()
	kc.Brokers = []string{b.Addr()}
	kc.Partitions = 2
	kc.Reader.SessionTimeout = time.Second
	kc.Reader.HeartbeatInterval = 200 * time.Millisecond
	kc.Reader.MaxWait = 50 * time.Millisecond
	if err := tkafka.EnsureTopics(ctx, kc); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(41, 42))
	o := schemas.DefaultSyntheticOptions()
	o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens, o.Tasks = 3, 256, 16, 4, 4
	var good []*schemas.Trajectory
	for i := 0; i < 12; i++ {
		good = append(good, schemas.Synthetic(rng, o))
	}
	bad := map[string]func(*schemas.Trajectory){
		"task id":        func(tr *schemas.Trajectory) { tr.TaskID = "task-\xff" },
		"message text":   func(tr *schemas.Trajectory) { tr.Messages[0].Content = "hello \xc3\x28 world" },
		"tool arguments": func(tr *schemas.Trajectory) { setFirstToolArguments(t, tr, "{\"id\":\"\xed\xa0\x80\"}") },
	}
	w, err := tkafka.NewWriter(kc, kc.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var msgs []tkafka.Message
	for i, tr := range good {
		f, err := schemas.FrameTrajectories(tr)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, tkafka.FromFramed(f))
		if i%4 == 0 && len(bad) > 0 {
			for name, mutate := range bad {
				delete(bad, name)
				evil := *schemas.Synthetic(rng, o)
				evil.Messages = append([]schemas.Message(nil), evil.Messages...)
				mutate(&evil)
				// EncodeBatch does not validate: this is what a buggy or hostile producer sends.
				value, err := schemas.EncodeBatch([]*schemas.Trajectory{&evil})
				if err != nil {
					t.Fatalf("encode %s: %v", name, err)
				}
				m := tkafka.FromFramed(schemas.Framed{Headers: schemas.Headers(schemas.ContentTypeArrowStream, schemas.MessageTypeTrajectories)})
				m.Key, m.Value = []byte("evil"), value
				msgs = append(msgs, m)
				break
			}
		}
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	cfg := archiver.DefaultConfig()
	cfg.DatasetDir = filepath.Join(t.TempDir(), "ds")
	cfg.Roll.MaxAge = 300 * time.Millisecond
	cfg.CommitInterval = 50 * time.Millisecond
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	a, err := archiver.OpenKafka(ctx, cfg, kc, archiver.Deps{Log: log}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	waitGroupCommitted(t, ctx, kc, cfg.Group)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("archiver: %v", err)
	}
	if a.Summary.DeadLetters != 3 {
		t.Fatalf("summary %+v: want 3 dead letters", a.Summary)
	}

	r, err := tkafka.NewGroupReader(kc, "ops", []string{kc.Topics.DeadLetters}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var reasons []string
	for i := 0; i < 3; i++ {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		info, err := tkafka.ParseDeadLetter(m)
		if err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, info.Error)
	}
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"task_id is not valid UTF-8", "message 0 content is not valid UTF-8", "arguments is not valid UTF-8"} {
		if !strings.Contains(all, want) {
			t.Errorf("dead letter errors %q lack %q", all, want)
		}
	}

	db := open(t)
	glob := filepath.Join(cfg.DatasetDir, "**", "*.parquet")
	for name, q := range map[string]string{
		"count": QueryCount, "reward": QueryRewardByDomainVersion, "roles": QueryMessagesByRole,
		"tool calls": QueryToolCalls, "tokens": QueryTokens, "per day": QueryPerDay,
		"success": QuerySuccessPerTask, "version": QueryVersionMetadata,
	} {
		rows := query(t, db, q, glob)
		if len(rows) == 0 {
			t.Fatalf("%s: no rows", name)
		}
		if name == "count" && num(rows[0][0]) != float64(len(good)) {
			t.Fatalf("archive holds %v trajectories, want the %d valid ones", rows[0][0], len(good))
		}
	}
}

// setFirstToolArguments replaces the arguments of the first tool call of tr.
func setFirstToolArguments(t *testing.T, tr *schemas.Trajectory, args string) {
	t.Helper()
	for i := range tr.Messages {
		if len(tr.Messages[i].ToolCalls) > 0 {
			tcs := append([]schemas.ToolCall(nil), tr.Messages[i].ToolCalls...)
			tcs[0].Arguments = args
			tr.Messages[i].ToolCalls = tcs
			return
		}
	}
	t.Fatal("synthetic trajectory has no tool call")
}

// waitGroupCommitted waits until group has committed the end of every
// partition of the trajectories topic.
func waitGroupCommitted(t *testing.T, ctx context.Context, kc tkafka.Config, group string) {
	t.Helper()
	admin, err := tkafka.NewAdmin(kc)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ends, err1 := admin.EndOffsets(ctx, kc.Topics.Trajectories)
		com, err2 := admin.CommittedOffsets(ctx, group, kc.Topics.Trajectories)
		if err1 == nil && err2 == nil {
			done := true
			for p, end := range ends {
				if end > 0 && com[p] != end {
					done = false
				}
			}
			if done {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("archiver did not commit the topic: ends %v committed %v (%v %v)", ends, com, err1, err2)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
