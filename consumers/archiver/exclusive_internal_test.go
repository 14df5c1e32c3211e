package archiver

import (
	"strings"
	"testing"
	"time"

	tkafka "tau2rl/lib/stream/kafka"
)

// TestGroupChecks: what the start-up check refuses and when a running archiver stops (two
// started at once both pass the start-up check; the one that started later stops).
func TestGroupChecks(t *testing.T) {
	self := tkafka.Owner{ID: "aaaa", Start: time.Unix(200, 0)}
	member := func(id string, start int64) tkafka.GroupMember {
		return tkafka.GroupMember{MemberID: "m-" + id, ClientID: "tau2rl", ClientHost: "/10.0.0.2",
			Owner: tkafka.Owner{ID: id, Start: time.Unix(start, 0)}, HasOwner: true}
	}
	plain := tkafka.GroupMember{MemberID: "m-x", ClientID: "rdkafka", ClientHost: "/10.0.0.9"}
	for _, tc := range []struct {
		name             string
		members          []tkafka.GroupMember
		startErr, runErr string
	}{
		{name: "empty group", members: nil},
		{name: "own ghost", members: []tkafka.GroupMember{member("aaaa", 100)}},
		{name: "other dataset, earlier", members: []tkafka.GroupMember{member("bbbb", 100), member("aaaa", 200)},
			startErr: "archiver of another dataset (dataset id bbbb", runErr: "started 1970-01-01T00:01:40Z before this one"},
		{name: "other dataset, later", members: []tkafka.GroupMember{member("aaaa", 200), member("bbbb", 300)},
			startErr: "archiver of another dataset (dataset id bbbb"},
		{name: "not an archiver", members: []tkafka.GroupMember{plain},
			startErr: `member that is not an archiver of this version (client "rdkafka" on /10.0.0.9)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error, want string) {
				t.Helper()
				if want == "" {
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Run one archiver per group") {
					t.Fatalf("%s: error %v, want one saying %q and what to do", what, err, want)
				}
			}
			check("start", refuseOtherDatasets(tc.members, "archiver", "/data/a", self.ID), tc.startErr)
			check("run", lostGroup(tc.members, "archiver", "/data/a", self), tc.runErr)
		})
	}
}
