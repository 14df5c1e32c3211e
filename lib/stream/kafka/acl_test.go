package kafka_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	tkafka "tau2rl/lib/stream/kafka"
)

// aclCluster starts a kfake cluster that enforces ACLs, with a superuser
// "admin" and the restricted user "svc" holding acls. It returns the
// connection settings of each.
func aclCluster(t *testing.T, acls ...kfake.ACL) (admin, svc tkafka.Config) {
	t.Helper()
	const mech = tkafka.SASLScramSHA256
	admin = kfakeConfig(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(mech, "admin", "admin-pw"),
		kfake.User(mech, "svc", "svc-pw", acls...))
	t.Setenv("TAU2_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("TAU2_TEST_SVC_PW", "svc-pw")
	svc = admin
	admin.SASL = tkafka.SASLConfig{Mechanism: mech, Username: "admin", PasswordEnv: "TAU2_TEST_ADMIN_PW"}
	svc.SASL = tkafka.SASLConfig{Mechanism: mech, Username: "svc", PasswordEnv: "TAU2_TEST_SVC_PW"}
	return admin, svc
}

// topicACL allows op on the topics named (literally) for svc.
func topicACL(op kmsg.ACLOperation, topics ...string) []kfake.ACL {
	var out []kfake.ACL
	for _, tp := range topics {
		out = append(out, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: tp,
			Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
	}
	return out
}

func TestEnsureTopicsWithoutCreatePermission(t *testing.T) {
	const (
		existing = "tau2.trajectories"
		readOnly = "tau2.rollout_requests"
		missing  = "tau2.infra_errors"
		hidden   = "tau2.dead_letters"
	)
	acls := append(topicACL(kmsg.ACLOperationWrite, existing, missing), topicACL(kmsg.ACLOperationRead, readOnly)...)
	admin, svc := aclCluster(t, acls...)
	ctx := testCtx(t, 30*time.Second)

	// The administrator creates two topics; svc may use them but not create.
	if err := tkafka.EnsureTopics(ctx, admin, existing, readOnly); err != nil {
		t.Fatalf("admin creates topics: %v", err)
	}

	// Every topic exists: svc starts although it has no CREATE permission
	// (asking to create them would fail with TOPIC_AUTHORIZATION_FAILED).
	if err := tkafka.EnsureTopics(ctx, svc, existing, readOnly, existing); err != nil {
		t.Fatalf("EnsureTopics of existing topics without CREATE: %v", err)
	}

	tests := []struct {
		name          string
		topics        []string
		missing, hide []string
	}{
		{"missing topic", []string{existing, missing}, []string{missing}, nil},
		{"invisible topic", []string{hidden, readOnly}, nil, []string{hidden}},
		{"both", []string{missing, existing, hidden}, []string{missing}, []string{hidden}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tkafka.EnsureTopics(ctx, svc, tc.topics...)
			var ae *tkafka.TopicAuthorizationError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want a *TopicAuthorizationError", err)
			}
			if !errors.Is(err, kafkago.TopicAuthorizationFailed) {
				t.Errorf("err %v does not wrap TopicAuthorizationFailed", err)
			}
			if strings.Join(ae.Missing, ",") != strings.Join(tc.missing, ",") || strings.Join(ae.Hidden, ",") != strings.Join(tc.hide, ",") {
				t.Errorf("missing %v hidden %v, want %v %v", ae.Missing, ae.Hidden, tc.missing, tc.hide)
			}
			if ae.Principal != "User:svc" {
				t.Errorf("principal %q", ae.Principal)
			}
			msg := err.Error()
			for _, want := range append(append([]string{"--allow-principal User:svc --operation Create"}, tc.missing...), tc.hide...) {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			for _, tp := range tc.topics {
				if !contains(tc.missing, tp) && !contains(tc.hide, tp) && strings.Contains(msg, tp) {
					t.Errorf("error %q names %s, which exists", msg, tp)
				}
			}
		})
	}

	// Nothing was created behind the administrator's back.
	a, err := tkafka.NewAdmin(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{missing, hidden} {
		if _, err := a.Partitions(ctx, tp); err == nil {
			t.Errorf("topic %s exists after denied creation", tp)
		}
	}
}

func TestEnsureTopicsCreatesOnlyMissing(t *testing.T) {
	// svc may create topics under the prefix "tau2." but not alter them.
	acls := []kfake.ACL{
		{Resource: kmsg.ACLResourceTypeTopic, Name: "tau2.", Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationCreate, Allow: true},
		{Resource: kmsg.ACLResourceTypeTopic, Name: "tau2.", Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationDescribe, Allow: true},
	}
	admin, svc := aclCluster(t, acls...)
	ctx := testCtx(t, 30*time.Second)
	admin.Partitions = 3
	if err := tkafka.EnsureTopics(ctx, admin, "tau2.trajectories"); err != nil {
		t.Fatal(err)
	}
	svc.Partitions = 5
	if err := tkafka.EnsureTopics(ctx, svc); err != nil {
		t.Fatalf("EnsureTopics with CREATE on the prefix: %v", err)
	}
	a, err := tkafka.NewAdmin(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range svc.Topics.All() {
		want := 5
		if tp == "tau2.trajectories" {
			want = 3
		}
		if parts, err := a.Partitions(ctx, tp); len(parts) != want {
			t.Errorf("%s: %d partitions (%v), want %d", tp, len(parts), err, want)
		}
	}
	// Outside the prefix svc may not create, and it is told so.
	err = tkafka.EnsureTopics(ctx, svc, "other.topic")
	var ae *tkafka.TopicAuthorizationError
	if !errors.As(err, &ae) || len(ae.Hidden) != 1 || ae.Hidden[0] != "other.topic" {
		t.Fatalf("creating outside the prefix: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
