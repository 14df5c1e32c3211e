package embedded

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"tau2rl/lib/logs"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// evictor works around kfake's ghost members (see the package documentation): a consumer killed
// while its JoinGroup waits for the rebalance keeps its partitions forever, because kfake arms no
// session timer for it. The evictor observes every group request (a kfake control function that
// handles nothing), remembers when each classic-group member last sent one and the timeouts it
// asked for, and sends the broker a LeaveGroup for a member that has been silent for longer than
// max(session timeout, rebalance timeout) plus a grace period — what a real broker's session
// timer would do. A live member is never silent that long: it heartbeats within its session
// timeout, or it waits in a JoinGroup bounded by its rebalance timeout.
type evictor struct {
	c    *kfake.Cluster
	addr string
	log  *slog.Logger
	// grace is added to a member's timeout before it is evicted.
	grace time.Duration
	// fallback is the timeout of a member the evictor saw in the group but never in a request
	// that carried its timeouts (it joined before the evictor saw it).
	fallback time.Duration
	now      func() time.Time

	mu      sync.Mutex
	members map[memberKey]*memberSeen
	// groups maps each group seen to the largest timeout its JoinGroup requests asked for: the
	// timeout of members first seen in a request without one (kafka-go's first JoinGroup has no
	// member id yet, so its timeouts cannot be tied to the member it creates).
	groups map[string]time.Duration
	stop   chan struct{}
	done   chan struct{}
}

type memberKey struct{ group, member string }

type memberSeen struct {
	last    time.Time
	timeout time.Duration
}

func newEvictor(c *kfake.Cluster, addr string, log *slog.Logger) *evictor {
	log = logs.OrDiscard(log)
	e := &evictor{c: c, addr: addr, log: log, grace: time.Second, fallback: 45 * time.Second, now: time.Now,
		members: map[memberKey]*memberSeen{}, groups: map[string]time.Duration{}, stop: make(chan struct{}), done: make(chan struct{})}
	c.Control(e.observe)
	return e
}

// observe records group activity; it never handles a request.
func (e *evictor) observe(req kmsg.Request) (kmsg.Response, error, bool) {
	var group, member string
	var timeout time.Duration
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		group, member = r.Group, r.MemberID
		timeout = time.Duration(max(r.SessionTimeoutMillis, r.RebalanceTimeoutMillis)) * time.Millisecond
	case *kmsg.SyncGroupRequest:
		group, member = r.Group, r.MemberID
	case *kmsg.HeartbeatRequest:
		group, member = r.Group, r.MemberID
	case *kmsg.OffsetCommitRequest:
		group, member = r.Group, r.MemberID
	case *kmsg.LeaveGroupRequest:
		e.mu.Lock()
		delete(e.members, memberKey{r.Group, r.MemberID})
		for _, m := range r.Members {
			delete(e.members, memberKey{r.Group, m.MemberID})
		}
		e.mu.Unlock()
		return nil, nil, false
	default:
		return nil, nil, false
	}
	if group == "" {
		return nil, nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.groups[group] = max(e.groups[group], timeout)
	if member == "" {
		return nil, nil, false
	}
	k := memberKey{group, member}
	m := e.members[k]
	if m == nil {
		m = &memberSeen{timeout: e.groupTimeout(group)}
		e.members[k] = m
	}
	m.last = e.now()
	if timeout > 0 {
		m.timeout = timeout
	}
	return nil, nil, false
}

// groupTimeout is the timeout assumed for a member of group whose own is unknown.
func (e *evictor) groupTimeout(group string) time.Duration {
	if t := e.groups[group]; t > 0 {
		return t
	}
	return e.fallback
}

// run checks the groups every interval until close.
func (e *evictor) run(interval time.Duration) {
	defer close(e.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		ghosts := e.silent()
		if len(ghosts) == 0 {
			continue
		}
		if cl == nil {
			var err error
			if cl, err = kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.RequestRetries(1)); err != nil {
				e.log.Warn("embedded broker: evictor client", "err", err)
				continue
			}
		}
		for _, g := range ghosts {
			e.evict(cl, g)
		}
	}
}

// silent returns the members, present in their group, that sent nothing for longer than their
// timeout plus the grace period.
func (e *evictor) silent() []memberKey {
	e.mu.Lock()
	groups := make([]string, 0, len(e.groups))
	for g := range e.groups {
		groups = append(groups, g)
	}
	e.mu.Unlock()
	var out []memberKey
	now := e.now()
	for _, g := range groups {
		info := e.c.GroupInfo(g)
		if info == nil {
			continue
		}
		present := map[string]bool{}
		e.mu.Lock()
		for _, m := range info.Members {
			present[m.MemberID] = true
			k := memberKey{g, m.MemberID}
			seen := e.members[k]
			if seen == nil { // never seen in a request: start its clock now
				e.members[k] = &memberSeen{last: now, timeout: e.groupTimeout(g)}
				continue
			}
			if now.Sub(seen.last) > seen.timeout+e.grace {
				out = append(out, k)
			}
		}
		for k := range e.members { // forget members the broker already removed
			if k.group == g && !present[k.member] {
				delete(e.members, k)
			}
		}
		e.mu.Unlock()
	}
	return out
}

func (e *evictor) evict(cl *kgo.Client, k memberKey) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = k.group, k.member
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: k.member}}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerrOf(resp)
	}
	if err != nil {
		e.log.Warn("embedded broker: evicting a silent group member failed", "group", k.group, "member", k.member, "err", err)
		return
	}
	e.mu.Lock()
	delete(e.members, k)
	e.mu.Unlock()
	e.log.Warn("embedded broker: evicted a group member that stopped talking (its connection is gone)", "group", k.group, "member", k.member)
}

func (e *evictor) close() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.done
}

// kerrOf returns the first error code of a LeaveGroup response.
func kerrOf(resp *kmsg.LeaveGroupResponse) error {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil && err != kerr.UnknownMemberID {
			return err
		}
	}
	return nil
}
