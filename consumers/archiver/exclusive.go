package archiver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tau2rl/lib/durable"
	"tau2rl/lib/logs"
	tkafka "tau2rl/lib/stream/kafka"
)

// datasetIDFile holds the dataset directory's id: the owner the archiver's consumer group is
// bound to (tkafka.NewExclusiveGroupReader).
const datasetIDFile = ".archiver.dataset-id"

// groupCheckInterval is how often a running archiver checks that its group has no archiver of
// another dataset that started before it.
var groupCheckInterval = 5 * time.Second

// datasetID returns the id of the dataset directory dir, creating it on first use. A
// directory's id never changes, so a restarted archiver (and the ghost member of its crashed
// predecessor) share it, and a copy of the directory restored elsewhere keeps it.
func datasetID(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("archiver: dataset dir %s: %w", dir, err)
	}
	p := filepath.Join(dir, datasetIDFile)
	if b, err := os.ReadFile(p); err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" || strings.ContainsAny(id, "\n\r") {
			return "", fmt.Errorf("archiver: %s holds no dataset id; remove it to create a new one", p)
		}
		return id, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("archiver: read dataset id: %w", err)
	}
	var rb [8]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return "", fmt.Errorf("archiver: dataset id: %w", err)
	}
	id := hex.EncodeToString(rb[:])
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("archiver: write dataset id: %w", err)
	}
	// Link, not rename: of two archivers starting on a new directory at once, one id wins and
	// the other reads it.
	if err := os.Link(tmp, p); err != nil && !errors.Is(err, os.ErrExist) {
		os.Remove(tmp)
		return "", fmt.Errorf("archiver: write dataset id: %w", err)
	}
	os.Remove(tmp)
	if err := durable.SyncDir(dir); err != nil {
		return "", fmt.Errorf("archiver: write dataset id: %w", err)
	}
	return datasetID(dir)
}

// errOtherDataset says why two archivers may not share a group.
const otherDatasetHelp = "two archivers in one group split the topic between their directories, " +
	"and every rebalance puts rows in both. Run one archiver per group: stop the other one, or give " +
	"this one its own group (archiver.group) to write a complete second copy (docs/OPERATIONS.md, " +
	"\"Archiver topologies\")"

// settledMembers describes group until no member lacks owner metadata, for at most wait: a
// member in the middle of a rebalance, or the predecessor of a restarted archiver killed while
// it joined, is listed without it for a while, and judging it then would refuse a restart.
func settledMembers(ctx context.Context, describe func(context.Context, string) ([]tkafka.GroupMember, error),
	group string, wait, every time.Duration) ([]tkafka.GroupMember, error) {
	deadline := time.Now().Add(wait)
	for {
		members, err := describe(ctx, group)
		if err != nil || !slices.ContainsFunc(members, func(m tkafka.GroupMember) bool { return !m.HasOwner }) || time.Now().After(deadline) {
			return members, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(every):
		}
	}
}

// ownGhosts drops (with a warning) the members without owner metadata that carry this
// process's own Kafka client id: an archiver's predecessor that died mid-join and that the
// broker has not expired yet, not a foreign consumer. It cannot take this dataset's rows
// elsewhere: it is dead, and a live consumer of another protocol cannot join the group anyway
// (the broker refuses inconsistent group protocols). Foreign clients stay, and are refused.
func ownGhosts(members []tkafka.GroupMember, clientID string, log *slog.Logger) []tkafka.GroupMember {
	out := members[:0:0]
	for _, m := range members {
		if !m.HasOwner && clientID != "" && m.ClientID == clientID {
			logs.OrDiscard(log).Warn("consumer group lists a member of this client id without archiver metadata; taking it for a dead predecessor the broker has not expired yet",
				"member", m.MemberID, "client", m.ClientID, "host", m.ClientHost)
			continue
		}
		out = append(out, m)
	}
	return out
}

// refuseOtherDatasets is the start-up check: the group may hold only archivers of this dataset
// (a restarted archiver's predecessor, until its session times out).
func refuseOtherDatasets(members []tkafka.GroupMember, group, dir, id string) error {
	for _, m := range members {
		switch {
		case !m.HasOwner:
			return fmt.Errorf("archiver: consumer group %q has a member that is not an archiver of this version (client %q on %s); %s",
				group, m.ClientID, m.ClientHost, otherDatasetHelp)
		case m.Owner.ID != id:
			return fmt.Errorf("archiver: consumer group %q is consumed by the archiver of another dataset (dataset id %s, client %q on %s, started %s), not this one (%s, id %s); %s",
				group, m.Owner.ID, m.ClientID, m.ClientHost, m.Owner.Start.UTC().Format(time.RFC3339), dir, id, otherDatasetHelp)
		}
	}
	return nil
}

// lostGroup is the running check: the group's partitions go to the archiver that started first
// (tkafka.ExclusiveWinner), so one that started later — two started at once, both passing the
// start-up check — stops with an error rather than sit idle.
func lostGroup(members []tkafka.GroupMember, group, dir string, self tkafka.Owner) error {
	var owners []tkafka.Owner
	for _, m := range members {
		if m.HasOwner {
			owners = append(owners, m.Owner)
		}
	}
	w, ok := tkafka.ExclusiveWinner(owners)
	if !ok || w.ID == self.ID {
		return nil
	}
	for _, m := range members {
		if m.HasOwner && m.Owner == w {
			return fmt.Errorf("archiver: consumer group %q is consumed by the archiver of another dataset (dataset id %s, client %q on %s, started %s before this one); stopping the archiver of %s (id %s): %s",
				group, w.ID, m.ClientID, m.ClientHost, w.Start.UTC().Format(time.RFC3339), dir, self.ID, otherDatasetHelp)
		}
	}
	return nil
}

// checkGroup returns the running check for Deps.CheckGroup.
func checkGroup(admin *tkafka.Admin, group, dir string, self tkafka.Owner) func(context.Context) error {
	return func(ctx context.Context) error {
		members, err := admin.GroupMembers(ctx, group)
		if err != nil {
			return fmt.Errorf("%w: %w", errGroupQuery, err)
		}
		return lostGroup(members, group, dir, self)
	}
}

// errGroupQuery marks a failed membership query: logged, not fatal.
var errGroupQuery = errors.New("archiver: group membership query failed")
