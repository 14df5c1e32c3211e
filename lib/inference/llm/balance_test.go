package llm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gopkg.in/yaml.v3"

	"tau2rl/lib/inference/llmtest"
)

// fakeClock is the injected clock of the health tests: time moves only
// when a test says so.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// tap records which pool member served each call.
type tap struct {
	Policy
	i      int
	served *int
}

func (p tap) Generate(ctx context.Context, req GenerateRequest) (GenerateResult, error) {
	*p.served = p.i
	return p.Policy.Generate(ctx, req)
}

// healthOp is one call of a health scenario: the clock moves by wait, the
// fault is queued on the member's scripted server, and the call must be
// served by member want, end with wantErr, and leave healthy endpoints in
// service.
type healthOp struct {
	wait     time.Duration
	want     int
	fault    func(*llmtest.Server)
	canceled bool
	wantErr  error
	healthy  int // -1: not checked
}

func (o healthOp) after(d time.Duration) healthOp { o.wait = d; return o }
func (o healthOp) h(n int) healthOp               { o.healthy = n; return o }

func ok(i int) healthOp { return healthOp{want: i, healthy: -1} }
func status(i, code int) healthOp {
	o := healthOp{want: i, healthy: -1, fault: func(s *llmtest.Server) { s.FailNext(1, code) }, wantErr: ErrUnavailable}
	if code/100 == 4 && code != http.StatusTooManyRequests {
		o.wantErr = ErrRejected
	}
	return o
}
func fail(i int) healthOp { return status(i, http.StatusInternalServerError) }
func drop(i int) healthOp {
	return healthOp{want: i, healthy: -1, fault: func(s *llmtest.Server) { s.DropNext(1) }, wantErr: ErrUnavailable}
}
func malformed(i int) healthOp {
	return healthOp{want: i, healthy: -1, fault: func(s *llmtest.Server) { s.MalformNext(1) }, wantErr: ErrBadResponse}
}
func canceled(i int) healthOp {
	return healthOp{want: i, healthy: -1, canceled: true, wantErr: context.Canceled}
}

// TestBalancedHealth drives pools of scripted servers through failures
// injected on the wire (HTTP 5xx/429/4xx, dropped connections, malformed
// answers), one call at a time, with a fake clock.
func TestBalancedHealth(t *testing.T) {
	const s = time.Second
	health := HealthConfig{FailureThreshold: 2, BaseCoolDown: 10 * s, MaxCoolDown: 40 * s}
	for _, tc := range []struct {
		name    string
		servers int
		cfg     HealthConfig
		ops     []healthOp
	}{
		{"fail-fast server ejected; failed probe doubles the cool-down; probe success restores", 2, health, []healthOp{
			fail(0).h(2), ok(1), fail(0).h(1), ok(1), ok(1), ok(1).after(9 * s),
			fail(0).after(1 * s).h(1), // the probe, at the end of the 10s cool-down
			ok(1), ok(1).after(19 * s), ok(0).after(1 * s).h(2), ok(1), ok(0),
		}},
		{"three servers: least in flight among those in service", 3, health, []healthOp{
			fail(0), ok(1), ok(2), fail(0).h(2), ok(1), ok(2), ok(1), ok(2),
			ok(0).after(10 * s).h(3), ok(1), ok(2), ok(0),
		}},
		{"a relapse soon after return keeps doubling; max_cool_down in service starts over", 2, health, []healthOp{
			fail(0), ok(1), fail(0).h(1), ok(1), ok(0).after(10 * s).h(2), // level 1 after this
			ok(1), fail(0), ok(1), fail(0).h(1), // back only 0s: 20s this time
			ok(1).after(19 * s), ok(0).after(1 * s).h(2),
			ok(1).after(40 * s), fail(0), ok(1), fail(0).h(1), // 40s in service: 10s again
			ok(1).after(9 * s), ok(0).after(1 * s).h(2),
		}},
		{"all ejected: the least recently failed serves, a success restores it", 2, HealthConfig{FailureThreshold: 1, BaseCoolDown: 10 * s}, []healthOp{
			fail(0).h(1), fail(1).after(1 * s).h(0), ok(0).after(1 * s).h(1), ok(0), ok(0),
		}},
		{"all ejected: a failed fallback call moves on and leaves the cool-down as it was", 2, HealthConfig{FailureThreshold: 1, BaseCoolDown: 10 * s}, []healthOp{
			fail(0).h(1), fail(1).after(1 * s).h(0), fail(0).after(1 * s).h(0), fail(1).h(0), fail(0).h(0),
			ok(0).after(8 * s).h(1), // 0's probe at its first cool-down's end (1's is a second later)
			ok(0), ok(1).after(1 * s).h(2),
		}},
		{"dropped connections, 503 and 429 count as infrastructure failures", 2, health, []healthOp{
			drop(0).h(2), ok(1), drop(0).h(1), ok(1), ok(0).after(10 * s).h(2),
			ok(1), status(0, 503), ok(1), status(0, 429).h(1),
		}},
		{"a 4xx or a malformed answer shows the server is up", 2, health, []healthOp{
			fail(0), ok(1), status(0, 400), ok(1), fail(0).h(2), ok(1), malformed(0).h(2), ok(1), fail(0).h(2), ok(1), fail(0).h(1),
		}},
		{"the caller's cancellation neither counts nor resets", 2, health, []healthOp{
			fail(0), ok(1), canceled(0).h(2), ok(1), fail(0).h(1),
		}},
		{"disabled: plain least-in-flight routing", 2, HealthConfig{Disable: true, FailureThreshold: 1}, []healthOp{
			fail(0), ok(1), fail(0).h(2), ok(1), fail(0).h(2), ok(1),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var servers []*llmtest.Server
			var members []Member
			served := -1
			for i := range tc.servers {
				srv := server(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
				servers = append(servers, srv)
				ep := fastEndpoint(t, srv.URL, nil, func(c *EndpointConfig) { c.MaxRetries = 0 })
				members = append(members, Member{Name: srv.URL, Policy: tap{Policy: NewSGLang(ep), i: i, served: &served}})
			}
			clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
			b := NewBalancedPool(tc.cfg, nil, members...)
			b.now = clock.now
			ids := prompt(t)
			for k, op := range tc.ops {
				clock.t = clock.t.Add(op.wait)
				if op.fault != nil {
					op.fault(servers[op.want])
				}
				ctx, cancel := context.WithCancel(context.Background())
				if op.canceled {
					cancel()
				}
				served = -1
				_, err := b.Generate(ctx, GenerateRequest{InputIDs: ids, MaxNewTokens: 2})
				cancel()
				if served != op.want {
					t.Fatalf("call %d: served by %d, want %d; %s", k, served, op.want, b)
				}
				if (op.wantErr == nil) != (err == nil) || (err != nil && !errors.Is(err, op.wantErr)) {
					t.Fatalf("call %d: error %v, want %v", k, err, op.wantErr)
				}
				if op.healthy >= 0 && b.Healthy() != op.healthy {
					t.Fatalf("call %d: %d endpoints in service, want %d; %s", k, b.Healthy(), op.healthy, b)
				}
			}
		})
	}
}

// TestBalancedInFlight covers what sequential calls cannot show: outcomes
// of calls dispatched before an ejection change nothing, and a half-open
// endpoint gets one probe at a time.
func TestBalancedInFlight(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	b := NewBalancedPool(HealthConfig{FailureThreshold: 2, BaseCoolDown: 10 * time.Second}, nil, Member{Name: "a"}, Member{Name: "b"})
	b.now = clock.now
	type call struct {
		i     int
		epoch uint64
		how   route
	}
	pick := func(want int, wantHow route) call {
		t.Helper()
		i, e, how := b.pick()
		if i != want || how != wantHow {
			t.Fatalf("pick: member %d route %d, want %d route %d; %s", i, how, want, wantHow, b)
		}
		return call{i, e, how}
	}
	unavailable := &Error{Kind: ErrUnavailable, Err: errors.New("HTTP 502")}
	var toA []call
	for range 4 {
		toA = append(toA, pick(0, routeNormal))
		pick(1, routeNormal) // stays in flight throughout
	}
	b.done(toA[0].i, toA[0].epoch, toA[0].how, unavailable)
	b.done(toA[1].i, toA[1].epoch, toA[1].how, unavailable) // ejects a
	b.done(toA[2].i, toA[2].epoch, toA[2].how, unavailable) // dispatched before: no second ejection
	if m := b.members[0]; !m.ejected || m.level != 1 || !m.until.Equal(clock.t.Add(10*time.Second)) {
		t.Fatalf("after a burst of failures: %s (level %d)", b, m.level)
	}
	b.done(toA[3].i, toA[3].epoch, toA[3].how, nil) // dispatched before: does not restore
	if !b.members[0].ejected {
		t.Fatalf("a success dispatched before the ejection restored the endpoint: %s", b)
	}
	pick(1, routeNormal) // a is out: b takes the call although busier

	clock.t = clock.t.Add(10 * time.Second)
	probe := pick(0, routeProbe)
	pick(1, routeNormal) // the probe is in flight: no second call to a
	b.done(probe.i, probe.epoch, probe.how, &Error{Err: context.Canceled})
	if !b.members[0].ejected || b.members[0].probing {
		t.Fatalf("a canceled probe: %s", b)
	}
	probe = pick(0, routeProbe) // a new probe may go
	b.done(probe.i, probe.epoch, probe.how, nil)
	if b.Healthy() != 2 || b.members[0].failures != 0 {
		t.Fatalf("after a successful probe: %s", b)
	}
}

// TestHealthMetrics: NewPolicy's pool reports its endpoints in service and
// its ejections on the registry.
func TestHealthMetrics(t *testing.T) {
	a := server(t, llmtest.Constant(llmtest.Reply{Content: "a"}))
	bsrv := server(t, llmtest.Constant(llmtest.Reply{Content: "b"}))
	reg := prometheus.NewRegistry()
	cfg := DefaultPolicyConfig()
	cfg.Endpoints = []EndpointConfig{{BaseURL: a.URL, Name: "a", MaxRetries: -1}, {BaseURL: bsrv.URL, Name: "b", MaxRetries: -1}}
	cfg.Health.FailureThreshold = 1
	p, _, err := NewPolicy(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	pool := p.(*Balanced)
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	pool.now = clock.now
	m, err := NewMetrics(reg) // the same series, already registered
	if err != nil {
		t.Fatal(err)
	}
	req := GenerateRequest{InputIDs: prompt(t), MaxNewTokens: 2}
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.healthy); got != 2 {
		t.Errorf("healthy endpoints = %v, want 2", got)
	}
	a.FailNext(1, http.StatusBadGateway)
	bsrv.FailNext(1, http.StatusBadGateway)
	for range 2 {
		if _, err := p.Generate(context.Background(), req); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("injected 502: %v", err)
		}
	}
	if got := testutil.ToFloat64(m.healthy); got != 0 {
		t.Errorf("healthy endpoints = %v after both failed, want 0", got)
	}
	if got := testutil.ToFloat64(m.ejected.WithLabelValues("a")); got != 1 {
		t.Errorf("ejections of a = %v, want 1", got)
	}
	// Both out: the call goes to b, which failed first, and it answers.
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got, up := testutil.ToFloat64(m.healthy), testutil.ToFloat64(m.up.WithLabelValues("b")); got != 1 || up != 1 {
		t.Errorf("after b's recovery: healthy %v, b in service %v", got, up)
	}
	if up := testutil.ToFloat64(m.up.WithLabelValues("a")); up != 0 {
		t.Errorf("a in service = %v, want 0", up)
	}
}

func TestHealthConfig(t *testing.T) {
	var cfg PolicyConfig
	err := yaml.Unmarshal([]byte("endpoints: [http://h:1]\nhealth: {failure_threshold: 5, base_cool_down: 2s, max_cool_down: 1m}\n"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := (HealthConfig{FailureThreshold: 5, BaseCoolDown: 2 * time.Second, MaxCoolDown: time.Minute}); cfg.Health != want {
		t.Errorf("decoded %+v, want %+v", cfg.Health, want)
	}
	for _, tc := range []struct {
		in, want HealthConfig
	}{
		{HealthConfig{}, DefaultHealthConfig()},
		{HealthConfig{FailureThreshold: -1, BaseCoolDown: -time.Second}, DefaultHealthConfig()},
		{HealthConfig{BaseCoolDown: 20 * time.Minute}, HealthConfig{FailureThreshold: 3, BaseCoolDown: 20 * time.Minute, MaxCoolDown: 20 * time.Minute}},
		{HealthConfig{Disable: true}, HealthConfig{Disable: true, FailureThreshold: 3, BaseCoolDown: 10 * time.Second, MaxCoolDown: 5 * time.Minute}},
	} {
		if got := tc.in.withDefaults(); got != tc.want {
			t.Errorf("%+v.withDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if got := NewBalanced(); !strings.Contains(got.String(), "Balanced") {
		t.Errorf("String() = %q", got)
	}
	if _, err := NewBalanced().Generate(context.Background(), GenerateRequest{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("empty pool: %v", err)
	}
}
