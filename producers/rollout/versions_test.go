package rollout_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/producers/rollout"
	"tau2rl/schemas"
)

// publishVersions announces versions on kc's policy-versions topic.
func publishVersions(t *testing.T, ctx context.Context, kc tkafka.Config, versions ...int64) {
	t.Helper()
	w, err := tkafka.NewWriter(kc, kc.Topics.PolicyVersions, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, v := range versions {
		f, err := schemas.FrameControl(&schemas.PolicyVersion{Version: v, CheckpointPath: "/ckpt", Time: time.Unix(v, 0).UTC()})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.PublishFramed(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
}

// follow runs FollowVersions until the returned stop function is called;
// stop returns FollowVersions' error.
func follow(t *testing.T, kc tkafka.Config, vs *rollout.Versions, m *rollout.Metrics) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rollout.FollowVersions(ctx, kc, vs, m, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("FollowVersions did not stop")
			return nil
		}
	}
}

// waitVersion waits until vs reaches want.
func waitVersion(t *testing.T, vs *rollout.Versions, want int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for vs.Latest() != want {
		if time.Now().After(deadline) {
			t.Fatalf("latest version %d, want %d", vs.Latest(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFollowVersionsWithoutConsumerGroup(t *testing.T) {
	kc := broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Versions published before the producer starts, and a message that
	// is not a policy version, which is skipped.
	publishVersions(t, ctx, kc, 3, 5)
	w, err := tkafka.NewWriter(kc, kc.Topics.PolicyVersions, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, tkafka.Message{Key: []byte("policy"), Value: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}

	m, err := rollout.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	vs1, vs2 := &rollout.Versions{}, &rollout.Versions{}
	stop1 := follow(t, kc, vs1, m)
	stop2 := follow(t, kc, vs2, nil)
	waitVersion(t, vs1, 5)
	waitVersion(t, vs2, 5)
	// The gauge is set right after the version is observed, by the follower's goroutine.
	for deadline := time.Now().Add(5 * time.Second); testutil.ToFloat64(m.PolicyVersion) != 5; {
		if time.Now().After(deadline) {
			t.Fatalf("policy version gauge %v, want 5", testutil.ToFloat64(m.PolicyVersion))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// New versions reach every follower; an older one never lowers it.
	publishVersions(t, ctx, kc, 7, 4)
	waitVersion(t, vs1, 7)
	waitVersion(t, vs2, 7)
	time.Sleep(200 * time.Millisecond)
	if vs1.Latest() != 7 || vs2.Latest() != 7 {
		t.Fatalf("latest went to %d/%d after version 4", vs1.Latest(), vs2.Latest())
	}
	if err := stop1(); err != nil {
		t.Fatalf("FollowVersions: %v", err)
	}
	if err := stop2(); err != nil {
		t.Fatalf("FollowVersions: %v", err)
	}

	// No consumer group was joined, so none is left behind.
	c := &kafkago.Client{Addr: kafkago.TCP(kc.Brokers...)}
	groups, err := c.ListGroups(ctx, &kafkago.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups.Groups) != 0 {
		t.Fatalf("consumer groups left on the broker: %+v", groups.Groups)
	}
}

// TestFollowVersionsLeastPrivilege runs the follower as a principal with
// READ on the policy-versions topic and no group ACL at all.
func TestFollowVersionsLeastPrivilege(t *testing.T) {
	const mech = tkafka.SASLScramSHA256
	kc := tkafka.DefaultConfig()
	topic := kc.Topics.PolicyVersions
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(mech, "admin", "admin-pw"),
		kfake.User(mech, "producer", "producer-pw", kfake.ACL{
			Resource: kmsg.ACLResourceTypeTopic, Name: topic, Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Operation: kmsg.ACLOperationRead, Allow: true,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	t.Setenv("TAU2_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("TAU2_TEST_PRODUCER_PW", "producer-pw")
	kc.Brokers = c.ListenAddrs()
	kc.Partitions = 2
	kc.Reader.MaxWait = 50 * time.Millisecond
	admin, producer := kc, kc
	admin.SASL = tkafka.SASLConfig{Mechanism: mech, Username: "admin", PasswordEnv: "TAU2_TEST_ADMIN_PW"}
	producer.SASL = tkafka.SASLConfig{Mechanism: mech, Username: "producer", PasswordEnv: "TAU2_TEST_PRODUCER_PW"}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tkafka.EnsureTopics(ctx, admin, topic); err != nil {
		t.Fatal(err)
	}
	publishVersions(t, ctx, admin, 11)
	vs := &rollout.Versions{}
	stop := follow(t, producer, vs, nil)
	waitVersion(t, vs, 11)
	publishVersions(t, ctx, admin, 12)
	waitVersion(t, vs, 12)
	if err := stop(); err != nil {
		t.Fatalf("FollowVersions: %v", err)
	}
}
