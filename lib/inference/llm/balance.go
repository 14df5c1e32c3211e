package llm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// HealthConfig configures passive health tracking of a Balanced pool: an
// endpoint is judged by the outcome of the calls it serves, with no extra
// health-check traffic. Without it, least-in-flight routing sends more and
// more calls to a server that fails fast (its calls finish quickly, so it
// always looks least busy).
//
// An endpoint in service is ejected after FailureThreshold consecutive
// infrastructure failures (ErrUnavailable: connection refused or reset,
// attempt timeouts, 429 and 5xx, each after the endpoint's own retries).
// It stays out for a cool-down, BaseCoolDown·2^k after its k-th ejection in
// a row, capped at MaxCoolDown; then it is half-open: it gets exactly one
// probe call, whose success puts it back in service and whose failure
// ejects it again for twice as long. The doubling starts over once an
// endpoint has stayed in service for MaxCoolDown. When every endpoint is
// ejected, calls still go out, each to the endpoint whose last failure is
// oldest, rather than failing without trying; a success there puts that
// endpoint back in service.
//
// Only ErrUnavailable counts against an endpoint. A rejected request (4xx)
// or a bad answer shows the server is up and resets its failure count; a
// call ended by the caller's own context says nothing about the server.
type HealthConfig struct {
	// Disable turns passive health off: plain least-in-flight routing.
	Disable bool `yaml:"disable"`
	// FailureThreshold is how many consecutive infrastructure failures eject
	// an endpoint (default 3). Each is already a call that failed after its
	// retries (EndpointConfig.MaxRetries).
	FailureThreshold int `yaml:"failure_threshold"`
	// BaseCoolDown is the length of a first ejection (default 10s).
	BaseCoolDown time.Duration `yaml:"base_cool_down"`
	// MaxCoolDown caps the doubling cool-down (default 5m), and is how long
	// an endpoint must stay in service for its cool-down to start over
	// from BaseCoolDown.
	MaxCoolDown time.Duration `yaml:"max_cool_down"`
}

// DefaultHealthConfig returns the defaults documented on HealthConfig.
func DefaultHealthConfig() HealthConfig {
	return HealthConfig{FailureThreshold: 3, BaseCoolDown: 10 * time.Second, MaxCoolDown: 5 * time.Minute}
}

// withDefaults fills zero (or negative) fields with the defaults, so that a
// configuration that leaves out the health block gets them.
func (c HealthConfig) withDefaults() HealthConfig {
	d := DefaultHealthConfig()
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = d.FailureThreshold
	}
	if c.BaseCoolDown <= 0 {
		c.BaseCoolDown = d.BaseCoolDown
	}
	if c.MaxCoolDown <= 0 {
		c.MaxCoolDown = d.MaxCoolDown
	}
	c.MaxCoolDown = max(c.MaxCoolDown, c.BaseCoolDown)
	return c
}

// Member is one policy of a Balanced pool with its name in metrics.
type Member struct {
	Name   string
	Policy Policy
}

// member is a Member's routing and health state, guarded by Balanced.mu.
type member struct {
	Member
	inflight int
	failures int // consecutive infrastructure failures while in service

	ejected     bool
	until       time.Time // end of the current cool-down
	probing     bool      // the half-open probe call is in flight
	level       int       // ejections in a row: the cool-down is base·2^level
	restoredAt  time.Time // last return to service
	lastFailure time.Time
	// epoch counts the member's state changes (ejection, return to service),
	// so that the outcome of a call dispatched under an older state (the
	// other calls in flight when it was ejected) changes nothing.
	epoch uint64
}

// route is how a call was dispatched.
type route uint8

const (
	routeNormal   route = iota // an endpoint in service
	routeProbe                 // the one probe of a half-open endpoint
	routeFallback              // every endpoint ejected: the least recently failed
)

// Balanced spreads calls over several policies (data-parallel servers),
// choosing, among the endpoints in service, the one with the fewest calls
// in flight (ties: round robin), with passive health tracking (see
// HealthConfig).
type Balanced struct {
	cfg     HealthConfig
	metrics *Metrics
	now     func() time.Time // the clock; tests replace it

	mu       sync.Mutex
	members  []member
	next     int
	reported bool // the pool's endpoints were added to the healthy gauge
}

// NewBalanced balances over ps (at least one) with the default health
// settings and no metrics; members are named by their index.
func NewBalanced(ps ...Policy) *Balanced {
	ms := make([]Member, len(ps))
	for i, p := range ps {
		ms[i] = Member{Name: strconv.Itoa(i), Policy: p}
	}
	return NewBalancedPool(DefaultHealthConfig(), nil, ms...)
}

// NewBalancedPool balances over members (at least one) with passive health
// cfg (zero fields: defaults); m (possibly nil) receives the health metrics.
func NewBalancedPool(cfg HealthConfig, m *Metrics, members ...Member) *Balanced {
	b := &Balanced{cfg: cfg.withDefaults(), metrics: m, now: time.Now, members: make([]member, len(members))}
	for i, mb := range members {
		b.members[i] = member{Member: mb}
	}
	return b
}

// Generate implements Policy.
func (b *Balanced) Generate(ctx context.Context, req GenerateRequest) (GenerateResult, error) {
	if len(b.members) == 0 {
		return GenerateResult{}, &Error{Op: "generate", Kind: ErrUnavailable, Err: errors.New("no policy endpoints")}
	}
	i, epoch, how := b.pick()
	res, err := b.members[i].Policy.Generate(ctx, req)
	b.done(i, epoch, how, err)
	return res, err
}

// Healthy reports how many endpoints are in service (not ejected).
func (b *Balanced) Healthy() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for i := range b.members {
		if !b.members[i].ejected {
			n++
		}
	}
	return n
}

// pick chooses the member for one call and counts it in flight.
func (b *Balanced) pick() (int, uint64, route) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.reported {
		b.reported = true
		for i := range b.members {
			b.metrics.endpointHealth(b.members[i].Name, true)
		}
	}
	now := b.now()
	n := len(b.members)
	best, how := -1, routeNormal
	for k := range n {
		i := (b.next + k) % n
		m := &b.members[i]
		if m.ejected && (m.probing || now.Before(m.until)) {
			continue
		}
		if best < 0 || m.inflight < b.members[best].inflight {
			best = i
		}
	}
	if best >= 0 && b.members[best].ejected {
		how = routeProbe
		b.members[best].probing = true
	}
	if best < 0 { // every endpoint ejected: the one that failed longest ago
		how = routeFallback
		for k := range n {
			i := (b.next + k) % n
			if best < 0 || b.members[i].lastFailure.Before(b.members[best].lastFailure) {
				best = i
			}
		}
	}
	b.next = (best + 1) % n
	m := &b.members[best]
	m.inflight++
	return best, m.epoch, how
}

// done records the outcome of a call dispatched by pick.
func (b *Balanced) done(i int, epoch uint64, how route, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := &b.members[i]
	m.inflight--
	if b.cfg.Disable {
		return
	}
	now := b.now()
	failed := errors.Is(err, ErrUnavailable)
	if failed {
		m.lastFailure = now
	}
	if m.epoch != epoch { // dispatched before the member's last state change
		return
	}
	if how == routeProbe {
		m.probing = false
	}
	switch {
	case failed && !m.ejected:
		m.failures++
		if m.failures >= b.cfg.FailureThreshold {
			if now.Sub(m.restoredAt) >= b.cfg.MaxCoolDown {
				m.level = 0
			}
			b.eject(m, now)
		}
	case failed && how == routeProbe:
		b.eject(m, now)
	case failed: // a fallback call to an ejected endpoint: its cool-down stands
	case err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrBadResponse):
		// The caller's context ended (or an error of no kind): no verdict.
	case m.ejected: // the server answered a probe or a fallback call
		m.ejected, m.probing, m.failures, m.restoredAt = false, false, 0, now
		m.epoch++
		b.metrics.endpointHealth(m.Name, true)
	default:
		m.failures = 0
	}
}

// eject takes m out of service for its next cool-down.
func (b *Balanced) eject(m *member, now time.Time) {
	wasIn := !m.ejected
	cool := b.cfg.BaseCoolDown << min(m.level, 30)
	if cool <= 0 || cool > b.cfg.MaxCoolDown {
		cool = b.cfg.MaxCoolDown
	}
	m.level++
	m.ejected, m.failures, m.until = true, 0, now.Add(cool)
	m.epoch++
	b.metrics.ejection(m.Name)
	if wasIn {
		b.metrics.endpointHealth(m.Name, false)
	}
}

// String describes the pool's state, for logs and test failures.
func (b *Balanced) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := "llm.Balanced{"
	for i := range b.members {
		m := &b.members[i]
		if i > 0 {
			s += ", "
		}
		state := "in service"
		if m.ejected {
			state = fmt.Sprintf("ejected until %s (level %d, probing %t)", m.until.Format(time.RFC3339Nano), m.level, m.probing)
		}
		s += fmt.Sprintf("%s: %s, %d in flight, %d failures", m.Name, state, m.inflight, m.failures)
	}
	return s + "}"
}
