package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"tau2rl/gpu"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/proc"
	trainckpt "tau2rl/trainer/checkpoint"
)

// unitCommand is a unit's command line as systemd runs it for one instance: %i expanded, the
// installed paths mapped to this test's files.
func unitCommand(line, instance string, paths map[string]string) []string {
	var out []string
	for _, f := range strings.Fields(strings.ReplaceAll(line, "%i", instance)) {
		for from, to := range paths {
			if strings.HasPrefix(f, from) {
				f = to + strings.TrimPrefix(f, from)
				break
			}
		}
		out = append(out, f)
	}
	return out
}

// TestSamplerUnit runs tau2-sampler@0.service's ExecStart command line — the real binary, the
// four-GPU layout's sampler-0.yaml with the pure-Go backend and the tiny model, the unit's
// Environment= and nothing else, a notify socket as systemd gives — and checks what the unit
// promises: READY=1 only once /health answers and the newest checkpoint of checkpoint_dir is
// served; ExecReload (the unit's own command, $MAINPID expanded) loads a newer checkpoint with
// RELOADING=1 … READY=1; SIGTERM drains — STOPPING=1, no new requests, the request in flight
// finishes whole — and the process exits 0 within the unit's TimeoutStopSec.
func TestSamplerUnit(t *testing.T) {
	needBinaries(t, "tau2-sampler")
	u, err := parseUnit(repoPath("deploy/systemd/tau2-sampler@.service"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	etc, work := filepath.Join(dir, "etc"), filepath.Join(dir, "work")
	for _, d := range []string{etc, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The tiny model as the configured model, and the trainer's checkpoint directory with v3.
	mc, err := gpu.LoadConfig(repoPath("deploy/models/qwen3-tiny/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	opts := gpu.InitOptions{Std: 0.5, NormJitter: 0.2}
	model := filepath.Join(dir, "model")
	if _, err := gpu.WriteRandomCheckpoint(model, mc, 1, opts, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	ckpts := filepath.Join(dir, "checkpoints")
	save := func(v int64) string {
		m := &trainckpt.Manager{Dir: ckpts, Keep: 5}
		p, err := m.Save(trainckpt.State{Version: v, Step: v}, func(d string) error {
			_, err := gpu.WriteRandomCheckpoint(d, mc, uint64(v)+10, opts, gpu.BF16)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	v3 := save(3)

	// The layout's config, with what this machine differs in: the pure-Go backend, the tiny model,
	// free loopback ports, the temporary checkpoint directory.
	listen, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(repoPath("deploy/config/one-host-4gpu/sampler-0.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(src, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["backend"], cfg["model"], cfg["checkpoint_dir"] = "cpu", model, ckpts
	cfg["listen"], cfg["metrics_addr"] = listen, metricsAddr
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "sampler-0.yaml"), b, 0o640); err != nil {
		t.Fatal(err)
	}

	// The environment systemd gives: its PATH, the unit's Environment= (installed paths mapped
	// here), the notify socket, and a watchdog short enough to count pings (the unit's is 120 s).
	paths := map[string]string{"/usr/local/bin/": bins.Dir + "/", "/etc/tau2rl/": etc + "/"}
	if tok, err := tokenizer.LocateQwen3(); err == nil {
		paths["/usr/local/share/tau2rl/qwen3-tokenizer"] = tok
	}
	sock := filepath.Join(dir, "notify")
	ns := listenNotify(t, sock)
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + work,
		"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=" + fmtUsec(400*time.Millisecond)}
	unitEnvVars := unitEnv(u, "0")
	if unitEnvVars["CUDA_VISIBLE_DEVICES"] != "0" {
		t.Errorf("the unit sets CUDA_VISIBLE_DEVICES=%q for instance 0, want 0", unitEnvVars["CUDA_VISIBLE_DEVICES"])
	}
	for k, v := range unitEnvVars {
		env = append(env, k+"="+unitCommand(v, "0", paths)[0])
	}
	execStart, _ := u.get("Service", "ExecStart")
	argv := unitCommand(execStart, "0", paths)
	logPath := filepath.Join(dir, "sampler.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // "already finished" once it has exited
	logTail := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	api := "http://" + listen
	waitNotify := func(what string, n int, timeout time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for ns.count(what) < n {
			select {
			case err := <-exited:
				t.Fatalf("tau2-sampler exited (%v) waiting for %s; log:\n%s", err, what, logTail())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s (#%d) after %s; log:\n%s", what, n, timeout, logTail())
			}
		}
	}

	// Ready: at READY=1, /health already answers and the newest checkpoint is served.
	waitNotify("READY=1", 1, 2*time.Minute)
	if code := httpStatus(api + "/health"); code != http.StatusOK {
		t.Fatalf("READY=1 sent but /health answers %d", code)
	}
	if p, v := samplerModel(t, api); p != v3 || v != "3" {
		t.Errorf("started on %s version %q, want the newest checkpoint %s version 3", p, v, v3)
	}

	// Reload: the unit's ExecReload, as systemd runs it.
	v4 := save(4)
	reload, _ := u.get("Service", "ExecReload")
	rargv := strings.Fields(strings.ReplaceAll(reload, "$MAINPID", strconv.Itoa(cmd.Process.Pid)))
	if out, err := exec.Command(rargv[0], rargv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("ExecReload %q: %v\n%s", reload, err, out)
	}
	waitNotify("RELOADING=1", 1, time.Minute)
	waitNotify("READY=1", 2, time.Minute)
	if p, v := samplerModel(t, api); p != v4 || v != "4" {
		t.Errorf("after ExecReload: serving %s version %q, want %s version 4", p, v, v4)
	}
	if got := scrapeValue(t, metricsAddr, "tau2rl_sampler_weight_version"); got != 4 {
		t.Errorf("tau2rl_sampler_weight_version = %v after the reload, want 4", got)
	}
	if got := scrapeValue(t, metricsAddr, "tau2rl_sampler_ready"); got != 1 {
		t.Errorf("tau2rl_sampler_ready = %v while serving, want 1", got)
	}
	if n := ns.count("WATCHDOG=1"); n < 2 {
		t.Errorf("%d watchdog pings: systemd would kill the sampler", n)
	}

	// Drain: of two requests in flight when SIGTERM arrives, the short one finishes whole and
	// the one that cannot finish within drain_timeout is aborted then; the process exits right
	// after, well within TimeoutStopSec.
	const short, long = 40, 8000
	type result struct {
		code   int
		finish string
		tokens int
		err    error
		at     time.Time
	}
	generate := func(n int, done chan<- result) {
		body := fmt.Sprintf(`{"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": %d, "ignore_eos": true, "temperature": 0}}`, n)
		resp, err := http.Post(api+"/generate", "application/json", strings.NewReader(body))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var out struct {
			OutputIDs []int `json:"output_ids"`
			Meta      struct {
				Finish struct {
					Type string `json:"type"`
				} `json:"finish_reason"`
			} `json:"meta_info"`
		}
		raw, _ := io.ReadAll(resp.Body)
		err = json.Unmarshal(raw, &out)
		done <- result{code: resp.StatusCode, finish: out.Meta.Finish.Type, tokens: len(out.OutputIDs), err: err, at: time.Now()}
	}
	shortDone, longDone := make(chan result, 1), make(chan result, 1)
	go generate(short, shortDone)
	go generate(long, longDone)
	deadline := time.Now().Add(30 * time.Second)
	for scrapeValue(t, metricsAddr, "tau2rl_sampler_running_requests") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the request never ran; log:\n%s", logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	sigterm := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitNotify("STOPPING=1", 1, 10*time.Second)
	if code := httpStatus(api + "/health"); code == http.StatusOK {
		t.Errorf("/health answers 200 during the drain: a load balancer would keep sending")
	}
	drain, err := time.ParseDuration(fmt.Sprint(cfg["drain_timeout"]))
	if err != nil {
		t.Fatalf("sampler-0.yaml drain_timeout: %v", err)
	}
	stopLimit := 2 * time.Minute
	if s, ok := u.get("Service", "TimeoutStopSec"); ok {
		if d, err := time.ParseDuration(strings.ReplaceAll(s, "min", "m")); err == nil {
			stopLimit = d
		}
	}
	if drain+10*time.Second >= stopLimit {
		t.Errorf("drain_timeout %s leaves no room under the unit's TimeoutStopSec %s", drain, stopLimit)
	}
	select {
	case err := <-exited:
		took := time.Since(sigterm)
		if err != nil {
			t.Errorf("exit after SIGTERM: %v (want status 0); log:\n%s", err, logTail())
		}
		if took < drain || took > drain+10*time.Second {
			t.Errorf("exited %s after SIGTERM, want just after drain_timeout %s (a request was still running)", took, drain)
		}
		t.Logf("exited 0 %.2fs after SIGTERM (drain_timeout %s)", took.Seconds(), drain)
	case <-time.After(stopLimit):
		t.Fatalf("still running %s after SIGTERM (the unit's TimeoutStopSec): systemd would SIGKILL it", stopLimit)
	}
	for _, c := range []struct {
		name   string
		r      result
		finish string
		tokens int
	}{{"short", <-shortDone, "length", short}, {"long", <-longDone, "abort", -1}} {
		switch r := c.r; {
		case r.err != nil:
			t.Errorf("%s request in flight at SIGTERM failed: %v", c.name, r.err)
		case r.at.Before(sigterm):
			t.Errorf("%s request finished before SIGTERM: nothing was drained", c.name)
		case r.code != http.StatusOK || r.finish != c.finish || (c.tokens >= 0 && r.tokens != c.tokens):
			t.Errorf("%s request in flight at SIGTERM: HTTP %d, finish %q, %d tokens; want 200, %s, %d tokens (-1: any)",
				c.name, r.code, r.finish, r.tokens, c.finish, c.tokens)
		default:
			t.Logf("%s request: finish %s after %d tokens, %.2fs after SIGTERM", c.name, r.finish, r.tokens, r.at.Sub(sigterm).Seconds())
		}
	}
}

// httpStatus GETs url and returns the status, 0 when the connection fails.
func httpStatus(url string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// samplerModel returns /get_model_info's model_path and weight_version.
func samplerModel(t *testing.T, api string) (string, string) {
	t.Helper()
	resp, err := http.Get(api + "/get_model_info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info protocol.ModelInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	return info.ModelPath, info.WeightVersion
}

// scrapeValue reads one unlabelled series from a /metrics page; -1 when the page has none.
func scrapeValue(t *testing.T, addr, name string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(errors.Join(fmt.Errorf("%s: %q", name, f[1]), err))
			}
			return v
		}
	}
	return -1
}
