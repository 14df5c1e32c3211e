// Package admission issues rollout requests so that in-flight work never runs more than
// max_head_offpolicyness policy versions ahead of the trainer (AReaL's StalenessManager).
//
// # The formula
//
// AReaL admits a new group while
//
//	accepted + running < (max_head_offpolicyness + version + 1) × B
//
// where B is the number of groups a training step consumes, version the number of completed
// steps, accepted the groups accepted so far (cumulative) and running those still being
// generated. Each completed step consumes exactly B accepted groups, so accepted = version·B +
// (accepted but not yet trained), and the rule is the same as
//
//	live < (max_head_offpolicyness + 1) × B
//
// with live = requests issued whose trajectories are not all finished — trained in a step,
// or discarded (filtered, infrastructure error, stale, timed out). The trainer uses this second
// form: it needs no cumulative counters, so it survives restarts. Capacity is additionally capped
// by max_concurrent_rollouts (AReaL's second condition):
//
//	capacity = min((max_head_offpolicyness + 1) × B, max_concurrent_rollouts) − live
//
// A request issued at version u can only yield tokens of versions ≥ u, which the trainer drops as
// stale once its version exceeds u + max_head_offpolicyness. The request is then finished for
// admission purposes (Expire), and the producers are told the same through StaleAfterVersion. A
// request that produces nothing (a producer crashed) is expired after request_timeout.
//
// Task ids cycle through the configured splits in a seeded random order per epoch, so a restart
// (which restores the position) continues the same sequence.
package admission

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"tau2rl/lib/uuid"
	"tau2rl/schemas"
)

// Source names one split of one domain to draw tasks from.
type Source struct {
	Domain string `yaml:"domain"`
	Split  string `yaml:"split"`
	// TaskIDs, when set, restricts the source to these tasks of the split (in this order; each
	// must exist). An experiment that trains on a subset — the tasks the policy can still fail,
	// say — names them here, as tau2-eval's and the self-driven producer's task_ids do.
	TaskIDs []string `yaml:"task_ids"`
}

// Config configures admission.
type Config struct {
	// Enabled makes the trainer publish rollout requests. Default true; turn it off when another
	// process drives the producers (evaluation, replay).
	Enabled bool `yaml:"enabled"`
	// Tasks are the splits to cycle through. Default [{airline, train}] (AReaL's τ² example).
	Tasks []Source `yaml:"tasks"`
	// Seed fixes the task order. Default 1.
	Seed uint64 `yaml:"seed"`
	// MaxConcurrentRollouts caps live requests (groups). Default 256 (AReaL τ² 1.7B).
	MaxConcurrentRollouts int `yaml:"max_concurrent_rollouts"`
	// RequestTimeout expires a request that has not finished. Default 30m.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// Sampling are the decoding parameters sent with every request. Default temperature 1.0
	// (AReaL τ²), top_p 1, max_tokens 8192.
	Sampling schemas.SamplingParams `yaml:"sampling"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Enabled: true, Tasks: []Source{{Domain: "airline", Split: "train"}}, Seed: 1,
		MaxConcurrentRollouts: 256, RequestTimeout: 30 * time.Minute,
		Sampling: schemas.SamplingParams{Temperature: 1, TopP: 1, MaxTokens: 8192},
	}
}

// Task is one task to request.
type Task struct {
	Domain, Split, ID string
}

type request struct {
	ID       string          `json:"id"`
	Domain   string          `json:"domain"`
	TaskID   string          `json:"task_id"`
	Version  int64           `json:"version"`
	Issued   time.Time       `json:"issued"`
	N        int             `json:"n"`
	Finished map[string]bool `json:"finished,omitempty"`
}

// Manager tracks live requests and issues new ones. It is not safe for concurrent use.
type Manager struct {
	cfg         Config
	tasks       []Task
	groupSize   int
	batchGroups int
	maxOff      int64
	issued      int64 // requests issued so far: the position in the task cycle
	live        map[string]*request
	perm        []int
	permEpoch   int64
}

// New returns a Manager over tasks. groupSize is n, batchGroups B, maxOff
// max_head_offpolicyness.
func New(cfg Config, tasks []Task, groupSize, batchGroups int, maxOff int64) (*Manager, error) {
	switch {
	case len(tasks) == 0:
		return nil, fmt.Errorf("admission: no tasks to request")
	case groupSize < 1 || batchGroups < 1 || maxOff < 0:
		return nil, fmt.Errorf("admission: group size %d, batch groups %d, max_head_offpolicyness %d: need ≥ 1, ≥ 1, ≥ 0", groupSize, batchGroups, maxOff)
	case cfg.MaxConcurrentRollouts < 1:
		return nil, fmt.Errorf("admission: max_concurrent_rollouts must be ≥ 1, got %d", cfg.MaxConcurrentRollouts)
	case cfg.RequestTimeout <= 0:
		return nil, fmt.Errorf("admission: request_timeout must be > 0, got %s", cfg.RequestTimeout)
	}
	probe := schemas.RolloutRequest{RequestID: "x", TaskID: "x", Domain: "x", Split: "x", GroupSize: 1, Sampling: cfg.Sampling}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	return &Manager{cfg: cfg, tasks: tasks, groupSize: groupSize, batchGroups: batchGroups, maxOff: maxOff,
		live: map[string]*request{}, permEpoch: -1}, nil
}

// Limit is the most live requests allowed: min((maxOff+1)·B, max_concurrent_rollouts).
func (m *Manager) Limit() int {
	return min(int(m.maxOff+1)*m.batchGroups, m.cfg.MaxConcurrentRollouts)
}

// Capacity is how many requests may be issued now.
func (m *Manager) Capacity() int { return max(0, m.Limit()-len(m.live)) }

// Live is the number of live requests.
func (m *Manager) Live() int { return len(m.live) }

// Issued is the number of requests issued since the first start.
func (m *Manager) Issued() int64 { return m.issued }

func (m *Manager) task(i int64) Task {
	n := int64(len(m.tasks))
	if epoch := i / n; epoch != m.permEpoch {
		m.perm = mrand.New(mrand.NewPCG(m.cfg.Seed, uint64(epoch))).Perm(len(m.tasks))
		m.permEpoch = epoch
	}
	return m.tasks[m.perm[i%n]]
}

// Issue creates up to Capacity requests at policy version and registers them as live. The caller
// publishes them and calls Cancel for any it could not publish.
func (m *Manager) Issue(version int64, now time.Time) ([]schemas.RolloutRequest, error) {
	var out []schemas.RolloutRequest
	for range m.Capacity() {
		t := m.task(m.issued)
		id := uuid.New()
		stale := schemas.StaleAfter(version, m.maxOff) // producers drop it past this (schemas.TooStale)
		r := schemas.RolloutRequest{RequestID: id, TaskID: t.ID, Domain: t.Domain, Split: t.Split, GroupSize: m.groupSize,
			PolicyVersion: version, StaleAfterVersion: &stale, Sampling: m.cfg.Sampling, IssuedAt: now.UTC()}
		m.issued++
		m.live[id] = &request{ID: id, Domain: t.Domain, TaskID: t.ID, Version: version, Issued: now, N: m.groupSize}
		out = append(out, r)
	}
	return out, nil
}

// Cancel forgets requests that were not published.
func (m *Manager) Cancel(reqs []schemas.RolloutRequest) {
	for _, r := range reqs {
		delete(m.live, r.RequestID)
	}
}

// Finished records that trajectory trajID of request requestID was trained or discarded. Unknown
// request ids (not issued by this trainer, or already expired) are ignored. It reports whether
// the request is now complete.
func (m *Manager) Finished(requestID, trajID string) bool {
	r := m.live[requestID]
	if r == nil {
		return false
	}
	if r.Finished == nil {
		r.Finished = map[string]bool{}
	}
	r.Finished[trajID] = true
	if len(r.Finished) >= r.N {
		delete(m.live, requestID)
		return true
	}
	return false
}

// Expire drops live requests that can no longer yield trainable samples (issued more than
// max_head_offpolicyness versions ago) or that timed out.
func (m *Manager) Expire(version int64, now time.Time) (stale, timedOut int) {
	for id, r := range m.live {
		switch {
		case version-r.Version > m.maxOff:
			stale++
			delete(m.live, id)
		case now.Sub(r.Issued) >= m.cfg.RequestTimeout:
			timedOut++
			delete(m.live, id)
		}
	}
	return stale, timedOut
}

type state struct {
	Issued int64      `json:"issued"`
	Live   []*request `json:"live"`
}

// State serialises the position in the task cycle and the live requests, for the checkpoint.
func (m *Manager) State() (json.RawMessage, error) {
	st := state{Issued: m.issued}
	for _, r := range m.live {
		st.Live = append(st.Live, r)
	}
	slices.SortFunc(st.Live, func(a, b *request) int { return a.Issued.Compare(b.Issued) })
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("admission: state: %w", err)
	}
	return b, nil
}

// Restore loads a State. Live requests are restored as they were at the checkpoint.
func (m *Manager) Restore(b json.RawMessage) error {
	if len(b) == 0 {
		return nil
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("admission: restore: %w", err)
	}
	if st.Issued < 0 {
		return fmt.Errorf("admission: restore: negative issued count %d", st.Issued)
	}
	m.issued = st.Issued
	m.live = map[string]*request{}
	for _, r := range st.Live {
		if r == nil || r.ID == "" || r.N < 1 {
			return fmt.Errorf("admission: restore: malformed live request %+v", r)
		}
		m.live[r.ID] = r
	}
	return nil
}
