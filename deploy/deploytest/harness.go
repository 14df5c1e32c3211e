// Package deploytest checks what deploy/ ships against the real binaries and
// the real tools an operator runs: systemd-analyze on the units, promtool on
// the monitoring rules, the binaries' own --print-config on the example
// configs, and graceful shutdown (SIGTERM mid-stream) of the real processes.
//
// The package's non-test code is the process harness the tests share: it
// builds the binaries once per test run and starts, probes and stops them as
// systemd would (SIGTERM, then a deadline).
package deploytest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ModuleRoot returns the directory holding go.mod, found by walking up from
// the working directory, so that tests find deploy/ and cmd/ wherever `go
// test` runs them.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("deploytest: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("deploytest: no go.mod above %s", wd)
		}
	}
}

// Binaries builds the tau2-* commands into one directory, once per process:
// several tests need the same binaries and a link of each is seconds of CPU.
type Binaries struct {
	// Root is the module root; Dir receives the binaries.
	Root, Dir string

	mu    sync.Mutex
	built map[string]error
}

// NewBinaries prepares a build into dir.
func NewBinaries(root, dir string) *Binaries {
	return &Binaries{Root: root, Dir: dir, built: map[string]error{}}
}

// Build builds the named commands (e.g. "tau2-archiver") that are not built
// yet, in one go invocation, and returns the first failure among names.
func (b *Binaries) Build(names ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var toBuild []string
	for _, n := range names {
		if _, ok := b.built[n]; !ok {
			toBuild = append(toBuild, n)
		}
	}
	if len(toBuild) > 0 {
		args := []string{"build", "-o", b.Dir + string(filepath.Separator)}
		for _, n := range toBuild {
			args = append(args, "./cmd/"+n)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = b.Root
		out, err := cmd.CombinedOutput()
		for _, n := range toBuild {
			if err != nil {
				b.built[n] = fmt.Errorf("go build %s: %v\n%s", strings.Join(toBuild, " "), err, out)
			} else {
				b.built[n] = nil
			}
		}
	}
	for _, n := range names {
		if err := b.built[n]; err != nil {
			return err
		}
	}
	return nil
}

// Path is the built binary's path.
func (b *Binaries) Path(name string) string { return filepath.Join(b.Dir, name) }

// Spec says how to run one binary: the same Spec starts it again after a stop.
type Spec struct {
	// Name labels the process in messages and names its log, Dir/Name.log.
	Name string
	// Bin is the executable; Args its arguments (without --metrics-addr).
	Bin  string
	Args []string
	// Env is added to the test's environment.
	Env []string
	// Dir is the working directory and where the log goes.
	Dir string
	// MetricsAddr is where /metrics and /healthz are served; empty picks a
	// free loopback port on the first start and keeps it for restarts.
	MetricsAddr string
}

// Proc is one running binary. Its stdout and stderr go to a log file, which
// error messages quote.
type Proc struct {
	// Name labels the process in messages; LogPath holds its output.
	Name, LogPath string
	// MetricsAddr is the host:port of its /metrics and /healthz.
	MetricsAddr string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start launches s.Bin with s.Args, serving metrics on s.MetricsAddr (chosen
// now if empty), and appends its output to s.Dir/s.Name.log, so a restarted
// process keeps one log.
func Start(s *Spec) (*Proc, error) {
	if s.MetricsAddr == "" {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		s.MetricsAddr = addr
	}
	logPath := filepath.Join(s.Dir, s.Name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("deploytest: %s log: %w", s.Name, err)
	}
	fmt.Fprintf(f, "=== start %s %s\n", s.Bin, strings.Join(s.Args, " "))
	cmd := exec.Command(s.Bin, append(append([]string{}, s.Args...), "--metrics-addr", s.MetricsAddr)...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("deploytest: start %s: %w", s.Name, err)
	}
	p := &Proc{Name: s.Name, LogPath: logPath, MetricsAddr: s.MetricsAddr, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(f, "=== exit %v\n", p.err)
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and its wait error.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// WaitHealthy polls /healthz until it answers 200 (the binary called Ready),
// the process exits, or timeout passes.
func (p *Proc) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		if ok, err := p.Exited(); ok {
			return fmt.Errorf("%s exited during start-up (%v):\n%s", p.Name, err, p.Tail(20))
		}
		resp, err := client.Get("http://" + p.MetricsAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy after %s:\n%s", p.Name, timeout, p.Tail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ErrKilled is returned by Stop when the process outlived its grace period.
var ErrKilled = errors.New("did not exit after SIGTERM; killed")

// Stop sends SIGTERM, as systemctl stop does, and waits up to grace for the
// process to exit. It returns nil only for exit status 0; a process still
// running after grace is killed (its whole group) and ErrKilled returned.
func (p *Proc) Stop(grace time.Duration) error {
	if ok, err := p.Exited(); ok {
		return p.exitErr(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr(p.err)
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s %w within %s:\n%s", p.Name, ErrKilled, grace, p.Tail(20))
	}
}

// Kill sends SIGKILL to the process group and waits: a crash, not a shutdown.
func (p *Proc) Kill() {
	if ok, _ := p.Exited(); ok {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (p *Proc) exitErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s exited with %v:\n%s", p.Name, err, p.Tail(20))
}

// Tail returns the last n lines of the process log, indented, for messages.
func (p *Proc) Tail(n int) string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return "    " + strings.Join(lines, "\n    ")
}

// Metrics fetches the process's /metrics text.
func (p *Proc) Metrics() (string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		return "", fmt.Errorf("%s: scrape: %w", p.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("%s: scrape: %w", p.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: scrape: %s", p.Name, resp.Status)
	}
	return string(b), nil
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("deploytest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// MetricSum parses Prometheus text exposition and returns the sum of a
// counter or gauge family over all its label sets (for a histogram or
// summary, the sum of its observation counts), and whether the family exists.
func MetricSum(text, name string) (float64, bool, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, false, fmt.Errorf("deploytest: parse metrics: %w", err)
	}
	f, ok := fams[name]
	if !ok {
		return 0, false, nil
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			sum += m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			sum += m.GetGauge().GetValue()
		case dto.MetricType_UNTYPED:
			sum += m.GetUntyped().GetValue()
		case dto.MetricType_HISTOGRAM:
			sum += float64(m.GetHistogram().GetSampleCount())
		case dto.MetricType_SUMMARY:
			sum += float64(m.GetSummary().GetSampleCount())
		}
	}
	return sum, true, nil
}

// Metric scrapes the process and returns MetricSum of one family (0 when the
// family has no series yet).
func (p *Proc) Metric(name string) (float64, error) {
	text, err := p.Metrics()
	if err != nil {
		return 0, err
	}
	v, _, err := MetricSum(text, name)
	return v, err
}

// MetricWhere scrapes the process and sums the series of one family whose
// label has the given value.
func (p *Proc) MetricWhere(name, label, value string) (float64, error) {
	text, err := p.Metrics()
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, fmt.Errorf("deploytest: parse metrics: %w", err)
	}
	sum := 0.0
	f, ok := fams[name]
	if !ok {
		return 0, nil
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return sum, nil
}

// WaitFor polls cond every 100ms until it holds, fails, or timeout passes;
// what names the condition in the error.
func WaitFor(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("deploytest: %s: not reached after %s (last error: %w)", what, timeout, last)
			}
			return fmt.Errorf("deploytest: %s: not reached after %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
