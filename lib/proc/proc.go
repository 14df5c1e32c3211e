// Package proc starts, probes and stops the project's binaries as child processes, the way
// systemd runs them: output appended to a log file, readiness on /healthz (every binary serves it
// beside /metrics once it has called Ready), SIGTERM with a grace period and then SIGKILL of the
// whole process group. tau2-run (make run, make learn) supervises the pipeline with it, and the
// process-level tests (deploy/deploytest, cmd/tau2-run's) start the real binaries with it, so a
// test sees a binary exactly as the runner starts it.
package proc

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Spec says how to run one binary: the same Spec starts it again after a stop.
type Spec struct {
	// Name labels the process in messages and names its log, LogDir/Name.log.
	Name string
	// Bin is the executable; Args its arguments (without --metrics-addr).
	Bin  string
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Dir is the working directory; empty: this process's.
	Dir string
	// LogDir receives Name.log, appended to so a restarted process keeps one log; empty: Dir.
	LogDir string
	// MetricsAddr is passed as --metrics-addr: where /metrics and /healthz are served. Empty
	// picks a free loopback port on the first start and keeps it for restarts.
	MetricsAddr string
	// NoMetricsAddr passes no --metrics-addr at all, leaving the binary's own default (one-shot
	// commands, whose default is off). WaitHealthy and Scrape then have nothing to ask.
	NoMetricsAddr bool
}

// Proc is one running binary. Its stdout and stderr go to its log file, which error messages
// quote.
type Proc struct {
	// Name labels the process in messages; LogPath holds its output.
	Name, LogPath string
	// MetricsAddr is the host:port of its /metrics and /healthz ("" with Spec.NoMetricsAddr).
	MetricsAddr string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start launches s.Bin with s.Args in its own process group (so Stop and Kill reach its
// children too), serving metrics on s.MetricsAddr (chosen now if empty), and appends its output,
// between "=== start" and "=== exit" lines, to its log.
func Start(s *Spec) (*Proc, error) {
	args := append([]string{}, s.Args...)
	if !s.NoMetricsAddr {
		if s.MetricsAddr == "" {
			addr, err := FreeAddr()
			if err != nil {
				return nil, err
			}
			s.MetricsAddr = addr
		}
		args = append(args, "--metrics-addr", s.MetricsAddr)
	}
	logDir := s.LogDir
	if logDir == "" {
		logDir = s.Dir
	}
	logPath := filepath.Join(logDir, s.Name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proc: %s: log file: %w", s.Name, err)
	}
	fmt.Fprintf(f, "=== start %s %s\n", s.Bin, strings.Join(args, " "))
	cmd := exec.Command(s.Bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("proc: %s: start %s: %w", s.Name, s.Bin, err)
	}
	p := &Proc{Name: s.Name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	if !s.NoMetricsAddr {
		p.MetricsAddr = s.MetricsAddr
	}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(f, "=== exit %v\n", p.err)
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has ended; Exited then gives its wait error.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended, and its wait error (nil for exit status 0).
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// WaitHealthy polls /healthz until it answers 200 (the binary called Ready), the process exits,
// or timeout passes.
func (p *Proc) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	if p.MetricsAddr == "" {
		return fmt.Errorf("proc: %s: started without --metrics-addr, so there is no /healthz to ask", p.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		if ok, err := p.Exited(); ok {
			return fmt.Errorf("%s exited during start-up (%v); last lines of %s:\n%s", p.Name, err, p.LogPath, p.Tail(20))
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
			return fmt.Errorf("%s not healthy after %s; last lines of %s:\n%s", p.Name, timeout, p.LogPath, p.Tail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM, as systemctl stop does, and waits up to grace for the process to exit. It
// returns nil only for exit status 0: a clean exit after SIGTERM is the graceful shutdown every
// binary promises. A process still running after grace is killed (its whole group) and ErrKilled
// returned.
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
		return fmt.Errorf("%s %w within %s; last lines of %s:\n%s", p.Name, ErrKilled, grace, p.LogPath, p.Tail(20))
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
	return fmt.Errorf("%s exited with %v; last lines of %s:\n%s", p.Name, err, p.LogPath, p.Tail(20))
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

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("proc: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
