package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one pipeline binary started by tau2-run. Its output goes to a log
// file under the run directory, so the terminal shows only progress.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	metrics string // host:port of its /metrics and /healthz
	done    chan struct{}
	err     error
}

// start launches bin with args, logging to dir/name.log.
func start(dir, bin, name, metricsAddr string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	if metricsAddr != "" {
		args = append(args, "--metrics-addr", metricsAddr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, metrics: metricsAddr, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and waits up to grace for a clean exit, then kills.
// A clean exit after SIGTERM is the graceful shutdown every binary promises.
func (p *proc) stop(grace time.Duration) error {
	if ok, err := p.exited(); ok {
		return exitErr(p.name, err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return exitErr(p.name, p.err)
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s: did not stop within %s after SIGTERM; killed (see %s)", p.name, grace, p.logPath)
	}
}

func exitErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// waitHealthy polls /healthz until it answers 200, the process exits, or ctx ends.
func (p *proc) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		if ok, err := p.exited(); ok {
			return fmt.Errorf("%s exited during start-up (%v); last lines of %s:\n%s", p.name, err, p.logPath, tail(p.logPath, 15))
		}
		resp, err := client.Get("http://" + p.metrics + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy after %s; last lines of %s:\n%s", p.name, timeout, p.logPath, tail(p.logPath, 15))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freeAddr returns a loopback address with a free port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := splitLines(string(b))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += "    " + l + "\n"
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
