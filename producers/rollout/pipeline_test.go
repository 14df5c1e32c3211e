package rollout_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"tau2rl/consumers/archiver"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/lib/stream"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/producers/rollout"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/episode"
)

func taskIDs(t *testing.T, domain, split string, n int) []string {
	t.Helper()
	set, err := episode.LoadTasks("", domain, split)
	if err != nil {
		t.Fatal(err)
	}
	e, err := env.New(domain, env.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range set.Tasks {
		c := task.EvaluationCriteria
		if c == nil || !slices.ContainsFunc(c.Actions, func(a data.Action) bool { return e.IsMutating(a.Name) }) {
			continue // only tasks whose gold actions change state: errors then matter
		}
		out = append(out, task.ID)
		if len(out) == n {
			break
		}
	}
	return out
}

// TestPipelineRewardsThroughBrokerAndArchiver: rollout requests flow through
// the real producer (token mode against the scripted server with injected
// errors), the embedded broker and the archiver into Parquet; the archived
// episodes have a range of rewards, shaped rewards, tokens and versions.
func TestPipelineRewardsThroughBrokerAndArchiver(t *testing.T) {
	kc := broker(t)
	srv := scriptedServer(t, 0.5)
	cfg := producerConfig(t, srv.URL)
	var reqs []schemas.RolloutRequest
	for _, id := range taskIDs(t, "airline", "train", 5) {
		reqs = append(reqs, request("airline", "train", id, 2, 4))
	}
	for _, id := range taskIDs(t, "telecom", "train", 2) {
		reqs = append(reqs, request("telecom", "train", id, 2, 4))
	}
	total := 2 * len(reqs)
	cfg.Episodes = total
	publishRequests(t, kc, reqs...)

	vs := &rollout.Versions{}
	svc, _ := startProducer(t, cfg, kc, vs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dir := t.TempDir()
	acfg := archiver.DefaultConfig()
	acfg.DatasetDir, acfg.Roll.MaxAge, acfg.CommitInterval = dir, 300*time.Millisecond, 50*time.Millisecond
	sink, err := archiver.ParquetSink(schemas.DefaultParquetWriterOptions())
	if err != nil {
		t.Fatal(err)
	}
	arch, err := archiver.OpenKafka(ctx, acfg, kc, archiver.Deps{NewSink: sink}, nil)
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(ctx)
	archDone := make(chan error, 1)
	go func() { archDone <- arch.Run(actx) }()

	if err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	sum := svc.Summary()
	if sum.Published != len(reqs) || sum.Episodes != total {
		t.Fatalf("summary %+v, want %d requests and %d episodes", sum, len(reqs), total)
	}
	if c, e := committed(t, kc, cfg.ConsumerGroup); c != e {
		t.Errorf("committed %d of %d request offsets", c, e)
	}

	// Wait for the archiver to have everything durable.
	var trajs []*schemas.Trajectory
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ds, err := dataset.Open(dir); err == nil {
			trajs, _, err = ds.ReadAll(ctx, dataset.Filter{IncludeInfraErrors: true})
			if err == nil && len(trajs) >= total {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	acancel()
	if err := <-archDone; err != nil && ctx.Err() == nil {
		t.Logf("archiver: %v", err)
	}
	if len(trajs) != total {
		t.Fatalf("archived %d trajectories, want %d", len(trajs), total)
	}
	rewards := map[float64]int{}
	shapedBelow := 0
	for _, tr := range trajs {
		if tr.Status != schemas.StatusOK {
			t.Errorf("trajectory %s: status %s: %s", tr.ID, tr.Status, tr.Error)
			continue
		}
		rewards[tr.Reward]++
		if tr.ShapedReward < tr.Reward {
			shapedBelow++
		}
		if len(tr.Calls) == 0 || tr.GeneratedTokens() == 0 || tr.RequestID == "" || tr.AgentModel != "scripted-policy" {
			t.Errorf("trajectory %s: %d calls, %d tokens, request %q, model %q", tr.ID, len(tr.Calls), tr.GeneratedTokens(), tr.RequestID, tr.AgentModel)
		}
		if tr.PolicyVersionStart != 4 || tr.MinVersion() != 0 {
			// The scripted server reports weight version "0"; the producer
			// believed 4 (from the requests).
			t.Errorf("trajectory %s: version start %d, token min %d", tr.ID, tr.PolicyVersionStart, tr.MinVersion())
		}
		last := tr.Calls[len(tr.Calls)-1]
		if last.ShapedReward != tr.ShapedReward {
			t.Errorf("trajectory %s: last call shaped %v, episode %v", tr.ID, last.ShapedReward, tr.ShapedReward)
		}
		if _, err := tr.FullPrompts(); err != nil {
			t.Error(err)
		}
	}
	if rewards[0] == 0 || rewards[1] == 0 {
		t.Errorf("want a range of rewards, got %v", rewards)
	}
	t.Logf("rewards %v, %d episodes shaped below their reward", rewards, shapedBelow)
}

// TestDeadLLMIsInfraErrorNotReward: with the inference server down, every
// episode is an infrastructure error on its own topic and a status
// infra_error trajectory, never a reward; the request is still committed.
func TestDeadLLMIsInfraErrorNotReward(t *testing.T) {
	kc := broker(t)
	srv := scriptedServer(t, 0)
	url := srv.URL
	srv.Close() // nothing listens there any more
	cfg := producerConfig(t, url)
	cfg.Episodes = 2
	req := request("airline", "train", taskIDs(t, "airline", "train", 1)[0], 2, 0)
	publishRequests(t, kc, req)
	svc, _ := startProducer(t, cfg, kc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if s := svc.Summary(); s.InfraErrors != 2 || s.Published != 1 {
		t.Fatalf("summary %+v", s)
	}
	infra := drain(t, kc, kc.Topics.InfraErrors, 2, 15*time.Second)
	if len(infra) != 2 {
		t.Fatalf("%d infra-error messages, want 2", len(infra))
	}
	for _, m := range infra {
		var ie schemas.InfraError
		if err := schemas.UnframeControl(m.Value, stream.HeaderMap(m), &ie); err != nil {
			t.Fatal(err)
		}
		if ie.Stage != episode.StageUser || ie.RequestID != req.RequestID || ie.Partial == nil {
			t.Errorf("infra error %+v", ie)
		}
	}
	msgs := drain(t, kc, kc.Topics.Trajectories, 1, 15*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d trajectory messages, want 1 (the group)", len(msgs))
	}
	trajs, err := schemas.UnframeTrajectories(msgs[0].Value, stream.HeaderMap(msgs[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trajs {
		if tr.Status != schemas.StatusInfraError || tr.Termination != schemas.TerminationInfrastructureError {
			t.Errorf("trajectory %s: status %s termination %s reward %v", tr.ID, tr.Status, tr.Termination, tr.Reward)
		}
	}
	if c, e := committed(t, kc, cfg.ConsumerGroup); c != e {
		t.Errorf("committed %d of %d", c, e)
	}
}

// TestStaleAndInvalidRequests: stale requests are dropped and counted,
// malformed ones dead-lettered; both are committed.
func TestStaleAndInvalidRequests(t *testing.T) {
	kc := broker(t)
	srv := scriptedServer(t, 0)
	cfg := producerConfig(t, srv.URL)
	cfg.MaxHeadOffpolicyness = 2
	id := taskIDs(t, "airline", "train", 1)[0]
	old := request("airline", "train", id, 2, 1) // 1 < 5-2
	fresh := request("airline", "train", id, 1, 5)
	pastDue := request("airline", "train", id, 1, 5)
	bound := int64(4)
	pastDue.StaleAfterVersion = &bound
	unknown := request("airline", "train", "no-such-task", 1, 5)
	publishRequests(t, kc, old, pastDue, unknown, fresh)
	// A message that is not a request at all.
	w, err := tkafka.NewWriter(kc, kc.Topics.RolloutRequests, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Write(ctx, tkafka.Message{Key: []byte("x"), Value: []byte("garbage")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	vs := &rollout.Versions{}
	vs.Observe(5)
	cfg.Episodes = 0
	svc, _ := startProducer(t, cfg, kc, vs)
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(rctx) }()
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		if s := svc.Summary(); s.Published == 1 && s.Stale == 2 && s.Invalid == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rcancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := svc.Summary()
	if s.Stale != 2 || s.Invalid != 2 || s.Published != 1 || s.Episodes != 1 {
		t.Fatalf("summary %+v", s)
	}
	if c, e := committed(t, kc, cfg.ConsumerGroup); c != e {
		t.Errorf("committed %d of %d", c, e)
	}
	if dl := drain(t, kc, kc.Topics.DeadLetters, 2, 15*time.Second); len(dl) != 2 {
		t.Errorf("%d dead letters, want 2", len(dl))
	}
}

// TestRedeliveryAfterKilledProducer: a producer stopped while its episodes
// run (grace 0: they are abandoned, nothing is committed) leaves the group;
// a second producer in the group gets the request again and completes it.
func TestRedeliveryAfterKilledProducer(t *testing.T) {
	kc := broker(t)
	srv := scriptedServer(t, 0)
	srv.SetLatency(300 * time.Millisecond)
	cfg := producerConfig(t, srv.URL)
	req := request("airline", "train", taskIDs(t, "airline", "train", 1)[0], 2, 0)
	publishRequests(t, kc, req)

	cfgA := cfg
	cfgA.ShutdownGrace = 0
	a, stopA := startProducer(t, cfgA, kc, nil)
	ctxA, cancelA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { doneA <- a.Run(ctxA) }()
	deadline := time.Now().Add(30 * time.Second)
	for a.Summary().Requests == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if a.Summary().Requests == 0 {
		t.Fatal("producer A never took the request")
	}
	cancelA() // "kill": no grace, in-flight episodes are abandoned
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	stopA()
	if s := a.Summary(); s.Abandoned != 1 || s.Published != 0 {
		t.Fatalf("producer A summary %+v", s)
	}
	if c, _ := committed(t, kc, cfg.ConsumerGroup); c != 0 {
		t.Fatalf("producer A committed %d", c)
	}

	srv.SetLatency(0)
	cfgB := cfg
	cfgB.Episodes = 2
	b, _ := startProducer(t, cfgB, kc, nil)
	ctxB, cancelB := context.WithTimeout(context.Background(), time.Minute)
	defer cancelB()
	if err := b.Run(ctxB); err != nil {
		t.Fatal(err)
	}
	if s := b.Summary(); s.Published != 1 || s.Episodes != 2 {
		t.Fatalf("producer B summary %+v", s)
	}
	msgs := drain(t, kc, kc.Topics.Trajectories, 1, 15*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d trajectory messages", len(msgs))
	}
	trajs, err := schemas.UnframeTrajectories(msgs[0].Value, stream.HeaderMap(msgs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 2 || trajs[0].RequestID != req.RequestID {
		t.Fatalf("got %d trajectories of request %q", len(trajs), trajs[0].RequestID)
	}
	if c, e := committed(t, kc, cfg.ConsumerGroup); c != e {
		t.Errorf("committed %d of %d", c, e)
	}
}

// TestInfraErrorKeepsCallLinks: an episode that fails after policy calls (the
// user simulator dies mid-episode) is published with its calls, and its
// assistant messages keep call_index pointing at them; only the partial on
// the infra-error topic drops calls and links (issue 13 item 7: every
// message of the trajectory had call_index -1 because the partial shared its
// messages).
func TestInfraErrorKeepsCallLinks(t *testing.T) {
	kc := broker(t)
	tk, _ := qwen3(t)
	needData(t)
	scfg := scripted.DefaultConfig()
	scfg.ErrorRate = 0
	script, err := scripted.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	userCalls := 0
	srv, err := llmtest.NewServer(tk, llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		if c.API == llmtest.APIChat {
			mu.Lock()
			userCalls++
			n := userCalls
			mu.Unlock()
			if n > 2 { // the user simulator answers twice, then fails for good
				return llmtest.Reply{}, errors.New("user simulator down")
			}
		}
		return script.Reply(ctx, c)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cfg := producerConfig(t, srv.URL)
	cfg.Episodes = 1
	req := request("airline", "train", taskIDs(t, "airline", "train", 1)[0], 1, 0)
	publishRequests(t, kc, req)
	svc, _ := startProducer(t, cfg, kc, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := drain(t, kc, kc.Topics.Trajectories, 1, 15*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d trajectory messages, want 1", len(msgs))
	}
	trajs, err := schemas.UnframeTrajectories(msgs[0].Value, stream.HeaderMap(msgs[0]))
	if err != nil {
		t.Fatal(err)
	}
	tr := trajs[0]
	if tr.Status != schemas.StatusInfraError || len(tr.Calls) == 0 {
		t.Fatalf("want an infra error after policy calls: status %s, %d calls (%s)", tr.Status, len(tr.Calls), tr.Error)
	}
	linked := map[int]bool{}
	for _, m := range tr.Messages {
		if m.CallIndex >= 0 {
			if m.Role != schemas.RoleAssistant {
				t.Errorf("%s message linked to call %d", m.Role, m.CallIndex)
			}
			linked[m.CallIndex] = true
		}
	}
	if len(linked) != len(tr.Calls) {
		t.Fatalf("%d of %d calls linked from messages", len(linked), len(tr.Calls))
	}
	infra := drain(t, kc, kc.Topics.InfraErrors, 1, 15*time.Second)
	var ie schemas.InfraError
	if err := schemas.UnframeControl(infra[0].Value, stream.HeaderMap(infra[0]), &ie); err != nil {
		t.Fatal(err)
	}
	if ie.Partial == nil || ie.Partial.Calls != nil {
		t.Fatalf("partial %+v should be present without calls", ie.Partial)
	}
	for _, m := range ie.Partial.Messages {
		if m.CallIndex != -1 {
			t.Fatalf("partial message linked to call %d without calls", m.CallIndex)
		}
	}
}
