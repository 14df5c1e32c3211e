package proc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"tau2rl/lib/proc"
)

// The child processes are this test binary re-run with childEnv set (the os/exec tests' helper
// process pattern): a real process with a real /healthz, /metrics and signal handling, started,
// probed and stopped through the package exactly as tau2-run starts the project's binaries.
const childEnv = "TAU2_PROC_TEST_CHILD"

// childMetrics is what a child serves on /metrics.
const childMetrics = `# TYPE jobs_total counter
jobs_total{outcome="ok"} 3
jobs_total{outcome="failed"} 1
# TYPE latency_seconds histogram
latency_seconds_bucket{le="1"} 2
latency_seconds_bucket{le="+Inf"} 2
latency_seconds_sum 0.5
latency_seconds_count 2
`

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// child is a stand-in binary: "serve" serves /healthz and /metrics on --metrics-addr and exits 0
// at SIGTERM, "ignore-term" does not exit at SIGTERM, "fail" exits 3 at once.
func child(mode string, args []string) int {
	fmt.Printf("child %s args %q\n", mode, args)
	if mode == "fail" {
		fmt.Println("bad configuration")
		return 3
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for i, a := range args {
		if a == "--metrics-addr" && i+1 < len(args) {
			ln, err := net.Listen("tcp", args[i+1])
			if err != nil {
				fmt.Println(err)
				return 1
			}
			mux := http.NewServeMux()
			mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {})
			mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, childMetrics) })
			go http.Serve(ln, mux) //nolint:errcheck // ends with the process
		}
	}
	<-term
	fmt.Println("got SIGTERM")
	if mode == "ignore-term" {
		select {}
	}
	return 0
}

func spec(t *testing.T, mode string, args ...string) *proc.Spec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &proc.Spec{Name: mode, Bin: self, Args: args, Env: []string{childEnv + "=" + mode}, Dir: t.TempDir()}
}

func readLog(t *testing.T, p *proc.Proc) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLifecycle: start, healthy, scraped, stopped cleanly by SIGTERM, restarted from the same
// Spec on the same metrics address with the log appended to.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	s := spec(t, "serve", "a=1")
	p, err := proc.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if s.MetricsAddr == "" || p.MetricsAddr != s.MetricsAddr {
		t.Fatalf("metrics address: spec %q, process %q", s.MetricsAddr, p.MetricsAddr)
	}
	if err := p.WaitHealthy(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := p.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	want := proc.Sample{"jobs_total": 4, "latency_seconds_sum": 0.5, "latency_seconds_count": 2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scrape %v, want %v", got, want)
	}
	ok, err := p.ScrapeWhere("outcome", "failed")
	if err != nil || ok["jobs_total"] != 1 {
		t.Fatalf("jobs_total{outcome=failed} = %v (%v), want 1", ok["jobs_total"], err)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("exited while serving")
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("clean SIGTERM: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	addr := s.MetricsAddr
	q, err := proc.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Kill)
	if q.MetricsAddr != addr || q.LogPath != p.LogPath {
		t.Fatalf("restart moved: %s %s, was %s %s", q.MetricsAddr, q.LogPath, addr, p.LogPath)
	}
	if err := q.WaitHealthy(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	log := readLog(t, q)
	for _, w := range []string{"--metrics-addr " + addr, "a=1", "got SIGTERM", "=== exit <nil>"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	if n := strings.Count(log, "=== start "); n != 2 {
		t.Errorf("%d start lines, want 2 (one log across restarts):\n%s", n, log)
	}
	if filepath.Dir(q.LogPath) != s.Dir || filepath.Base(q.LogPath) != "serve.log" {
		t.Errorf("log at %s, want %s/serve.log", q.LogPath, s.Dir)
	}
}

// TestStopKillsAfterGrace: a process that ignores SIGTERM is killed when the grace runs out.
func TestStopKillsAfterGrace(t *testing.T) {
	p, err := proc.Start(spec(t, "ignore-term"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.WaitHealthy(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	err = p.Stop(300 * time.Millisecond)
	if !errors.Is(err, proc.ErrKilled) || !strings.Contains(err.Error(), "got SIGTERM") {
		t.Fatalf("Stop of a process ignoring SIGTERM: %v; want ErrKilled quoting its log", err)
	}
	if exited, _ := p.Exited(); !exited {
		t.Fatal("still running after Stop")
	}
}

// TestFailedStart: a process that exits during start-up is reported with its log, by WaitHealthy
// and by Stop.
func TestFailedStart(t *testing.T) {
	p, err := proc.Start(spec(t, "fail"))
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitHealthy(context.Background(), 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited during start-up") || !strings.Contains(err.Error(), "bad configuration") {
		t.Fatalf("WaitHealthy: %v", err)
	}
	if err := p.Stop(time.Second); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Stop after a failed start: %v, want exit status 3", err)
	}
}

// TestNoMetricsAddr: a one-shot command gets no --metrics-addr; its log goes to LogDir while it
// runs in Dir.
func TestNoMetricsAddr(t *testing.T) {
	s := spec(t, "fail")
	s.NoMetricsAddr, s.LogDir = true, t.TempDir()
	p, err := proc.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.MetricsAddr != "" || filepath.Dir(p.LogPath) != s.LogDir {
		t.Fatalf("metrics %q, log %s", p.MetricsAddr, p.LogPath)
	}
	if log := readLog(t, p); strings.Contains(log, "--metrics-addr") || !strings.Contains(log, "=== exit exit status 3") {
		t.Fatalf("log:\n%s", log)
	}
	if err := p.WaitHealthy(context.Background(), time.Second); err == nil {
		t.Fatal("WaitHealthy without a metrics address succeeded")
	}
	if _, err := p.Scrape(); err == nil {
		t.Fatal("Scrape without a metrics address succeeded")
	}
}

func TestStartErrors(t *testing.T) {
	s := spec(t, "serve")
	s.Bin = filepath.Join(t.TempDir(), "no-such-binary")
	if _, err := proc.Start(s); err == nil || !strings.Contains(err.Error(), "no-such-binary") {
		t.Fatalf("missing binary: %v", err)
	}
	s = spec(t, "serve")
	s.Dir = filepath.Join(t.TempDir(), "missing")
	if _, err := proc.Start(s); err == nil || !strings.Contains(err.Error(), "log file") {
		t.Fatalf("log directory missing: %v", err)
	}
}
