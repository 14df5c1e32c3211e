package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Owner says, for a group one output may consume (NewExclusiveGroupReader), which output a
// member writes — the archiver's dataset — and when the member started. Several members of one
// owner (a restarted process and the ghost of its predecessor, still in the group until its
// session times out) share the partitions; members of different owners never do.
type Owner struct {
	// ID names the output (the archiver: the id stored in its dataset directory).
	ID string
	// Start is when the member started; the earliest owner in the group keeps it.
	Start time.Time
}

// GroupMember is a member of a consumer group as the broker describes it.
type GroupMember struct {
	MemberID, ClientID, ClientHost string
	// Owner is set for members of an exclusive group (HasOwner).
	Owner    Owner
	HasOwner bool
}

// exclusiveProtocol is the assignment protocol of exclusive groups. A consumer that offers only
// the usual ones (range, roundrobin: kcat, kafka-console-consumer, an older tau2rl) cannot join
// such a group — the broker answers INCONSISTENT_GROUP_PROTOCOL — so it cannot take partitions.
const exclusiveProtocol = "tau2rl-exclusive-range-v1"

var ownerMagic = []byte("tau2rl-owner/1\n")

func encodeOwner(o Owner) []byte {
	return append(append(bytes.Clone(ownerMagic), o.ID...), "\n"+strconv.FormatInt(o.Start.UnixNano(), 10)...)
}

func decodeOwner(b []byte) (Owner, bool) {
	rest, ok := bytes.CutPrefix(b, ownerMagic)
	if !ok {
		return Owner{}, false
	}
	id, start, ok := bytes.Cut(rest, []byte("\n"))
	if !ok || len(id) == 0 {
		return Owner{}, false
	}
	ns, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return Owner{}, false
	}
	return Owner{ID: string(id), Start: time.Unix(0, ns)}, true
}

// ExclusiveWinner is the owner that keeps an exclusive group: the one whose member started
// first (ties broken by id). ok is false when no member has an owner.
func ExclusiveWinner(owners []Owner) (Owner, bool) {
	if len(owners) == 0 {
		return Owner{}, false
	}
	w := owners[0]
	for _, o := range owners[1:] {
		if o.Start.Before(w.Start) || (o.Start.Equal(w.Start) && o.ID < w.ID) {
			w = o
		}
	}
	return w, true
}

// exclusiveBalancer assigns every partition to the members of the winning owner (range
// assignment among them) and none to the others, so partitions never split across outputs,
// even for the moment between a second owner joining and noticing it lost.
type exclusiveBalancer struct{ self Owner }

func (b exclusiveBalancer) ProtocolName() string      { return exclusiveProtocol }
func (b exclusiveBalancer) UserData() ([]byte, error) { return encodeOwner(b.self), nil }

func (b exclusiveBalancer) AssignGroups(members []kafkago.GroupMember, partitions []kafkago.Partition) kafkago.GroupMemberAssignments {
	var owners []Owner
	of := map[string]Owner{}
	for _, m := range members {
		if o, ok := decodeOwner(m.UserData); ok {
			owners = append(owners, o)
			of[m.ID] = o
		}
	}
	out := kafkago.GroupMemberAssignments{}
	for _, m := range members {
		out[m.ID] = map[string][]int{}
	}
	w, ok := ExclusiveWinner(owners)
	if !ok {
		return out
	}
	var eligible []kafkago.GroupMember
	for _, m := range members {
		if o, ok := of[m.ID]; ok && o.ID == w.ID {
			eligible = append(eligible, m)
		}
	}
	sort.Slice(eligible, func(i, j int) bool { return eligible[i].ID < eligible[j].ID })
	for id, a := range (kafkago.RangeGroupBalancer{}).AssignGroups(eligible, partitions) {
		out[id] = a
	}
	return out
}

// NewExclusiveGroupReader joins group on topics like NewGroupReader, for a consumer whose output
// must not be split: the group's partitions all go to the members of one owner — the one that
// started first — and a member of any other owner gets none. The archiver uses it so that two
// archivers writing different directories never share a group (each would hold part of the
// topic, and a rebalance would put rows in both); it checks GroupMembers to stop with an error
// rather than sit idle.
func NewExclusiveGroupReader(cfg Config, group string, topics []string, m *Metrics, owner Owner) (*GroupReader, error) {
	if owner.ID == "" || bytes.ContainsAny([]byte(owner.ID), "\n") {
		return nil, fmt.Errorf("kafka reader: exclusive owner id %q: must be one non-empty line", owner.ID)
	}
	return newGroupReader(cfg, group, topics, m, []kafkago.GroupBalancer{exclusiveBalancer{self: owner}})
}

// GroupMembers describes the live members of group (none for a group the broker does not know
// or that is empty).
func (a *Admin) GroupMembers(ctx context.Context, group string) ([]GroupMember, error) {
	resp, err := a.c.DescribeGroups(ctx, &kafkago.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return nil, fmt.Errorf("kafka: describe group %s: %w", group, err)
	}
	var out []GroupMember
	for _, g := range resp.Groups {
		if g.Error != nil {
			if errors.Is(g.Error, kafkago.GroupIdNotFound) {
				return nil, nil
			}
			return nil, fmt.Errorf("kafka: describe group %s: %w", group, g.Error)
		}
		for _, m := range g.Members {
			gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			gm.Owner, gm.HasOwner = decodeOwner(m.MemberMetadata.UserData)
			out = append(out, gm)
		}
	}
	return out, nil
}
