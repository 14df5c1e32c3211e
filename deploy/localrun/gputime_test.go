package localrun

import (
	"encoding/json"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tau2rl/gpu/sampler"
	"tau2rl/producers/rollout"
	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/step"
)

func TestParseSMILine(t *testing.T) {
	for _, c := range []struct {
		line     string
		util     float64 // -1: absent
		used     float64
		card, ix string
		err      string
	}{
		{"0, NVIDIA H100 80GB HBM3, 97, 61234, 81559", 97, 61234, "NVIDIA H100 80GB HBM3", "0", ""},
		{"3, NVIDIA H200, [N/A], 1024, 143771", -1, 1024, "NVIDIA H200", "3", ""},
		{"1, MIG 1g.10gb, [Not Supported], [N/A], [N/A]", -1, 0, "MIG 1g.10gb", "1", ""},
		{"0, card, 250, 1, 2", -1, 1, "card", "0", ""}, // utilisation above 100%: not a reading
		{"0, NVIDIA H100, 97", 0, 0, "", "", "want 5 fields"},
		{", card, 1, 2, 3", 0, 0, "", "", "no GPU index"},
	} {
		s, err := parseSMILine(c.line)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.line, err, c.err)
			}
			continue
		}
		if err != nil || s.Role != report.RoleGPU || s.Name != c.ix || s.Card != c.card || s.MemUsedMiB != c.used ||
			(c.util < 0) != (s.Util == nil) || (s.Util != nil && *s.Util != c.util) {
			t.Errorf("%q: %+v %v", c.line, s, err)
		}
	}
}

// FuzzParseSMILine: nvidia-smi's output varies with drivers and cards; a line either parses to
// a sample with a utilisation in [0, 100] and non-negative memory, or is an error.
func FuzzParseSMILine(f *testing.F) {
	f.Add("0, NVIDIA H100 80GB HBM3, 97, 61234, 81559")
	f.Add("1, MIG, [N/A], -5, NaN")
	f.Fuzz(func(t *testing.T, line string) {
		s, err := parseSMILine(line)
		if err != nil {
			return
		}
		if s.Util != nil && !(*s.Util >= 0 && *s.Util <= 100) || s.MemUsedMiB < 0 || s.MemTotalMiB < 0 || s.Name == "" {
			t.Fatalf("%q → %+v", line, s)
		}
	})
}

// serveMetrics serves reg's /metrics as the processes do.
func serveMetrics(t *testing.T, reg *prometheus.Registry) string {
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestTimelineRecordsAndSummarises: the timeline reads the sampler's, the trainer's and the
// producer's real metric sets (their own NewMetrics), and nvidia-smi's CSV from a stand-in that
// prints what nvidia-smi prints; gputime.jsonl then holds a reading of each at the start and
// at the end, and its summary has the busy time each process counted in between.
func TestTimelineRecordsAndSummarises(t *testing.T) {
	sreg, treg, preg := prometheus.NewRegistry(), prometheus.NewRegistry(), prometheus.NewRegistry()
	if _, err := sampler.NewMetrics(sreg); err != nil {
		t.Fatal(err)
	}
	tm, err := step.NewMetrics(treg)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := rollout.NewMetrics(preg)
	if err != nil {
		t.Fatal(err)
	}
	saddr, taddr, paddr := serveMetrics(t, sreg), serveMetrics(t, treg), serveMetrics(t, preg)

	smi := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\ncase \"$*\" in *" + smiQuery + "*) ;; *) exit 2;; esac\n" +
		"while :; do echo '0, NVIDIA H100 80GB HBM3, 80, 1000, 81559'; sleep 0.05; done\n"
	if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var mu sync.Mutex
	var warnings []string
	tl, err := startTimeline(dir, []timelineSource{
		{report.RoleSampler, "s0", saddr}, {report.RoleTrainer, "trainer", taddr}, {report.RoleProducer, "producer", paddr},
		{report.RoleSampler, "down", "127.0.0.1:1"},
	}, smi, func(f string, a ...any) { mu.Lock(); warnings = append(warnings, f); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	tm.BusySeconds.WithLabelValues(step.BusyTrain).Add(0.1)
	tm.Steps.Inc()
	pm.EpisodesFinished.WithLabelValues("airline", "ok", "user_stop").Add(3)
	pm.LLMLatency.WithLabelValues("agent").Observe(0.1)
	pm.EpisodeSeconds.WithLabelValues("airline").Observe(0.4)
	pm.LLMLatency.WithLabelValues("user").Observe(0.1) // the user simulator's calls are not the policy's
	pm.Tokens.WithLabelValues("airline", "completion").Add(50)
	pm.Tokens.WithLabelValues("airline", "prompt").Add(500)
	if err := tl.stop(); err != nil {
		t.Fatal(err)
	}
	if err := tl.stop(); err != nil { // idempotent
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, report.TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := report.ReadTimeline(f)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, s := range samples {
		count[s.Role+"/"+s.Name]++
	}
	if count["sampler/s0"] != 2 || count["trainer/trainer"] != 2 || count["producer/producer"] != 2 || count["gpu/0"] < 2 || count["sampler/down"] != 0 {
		t.Fatalf("readings per source %v", count)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "not read") {
		t.Errorf("warnings %q, want one for the sampler that is down", warnings)
	}
	g := report.SummarizeTimeline(samples)
	var tr, pr report.RoleTime
	for _, r := range g.Roles {
		switch r.Role {
		case report.RoleTrainer:
			tr = r
		case report.RoleProducer:
			pr = r
		}
	}
	if tr.BusyShare[step.BusyTrain] <= 0 || tr.PerSecond[report.CountSteps] <= 0 {
		t.Errorf("trainer %+v", tr)
	}
	if w := pr.WallSeconds; !near(pr.PerSecond[report.CountEpisodes]*w, 3) || !near(pr.PerSecond[report.CountCalls]*w, 1) || !near(pr.PerSecond[report.CountGeneratedTokens]*w, 50) ||
		!near(pr.PerSecond[report.CountEpisodeSeconds]*w, 0.4) || !near(pr.PerSecond[report.CountAgentSeconds]*w, 0.1) {
		t.Errorf("producer %+v", pr)
	}
	if len(g.GPUs) != 1 || g.GPUs[0].MeanUtil != 80 || g.GPUs[0].Card != "NVIDIA H100 80GB HBM3" {
		t.Errorf("gpus %+v", g.GPUs)
	}
}

// TestSampleOfOldBuild: a process built before the busy-time counters is a named error, not a
// reading of zeros that would report it idle.
func TestSampleOfOldBuild(t *testing.T) {
	_, err := sampleOf(report.RoleSampler, "s", []byte("tau2rl_sampler_steps_total 3\n"))
	if err == nil || !strings.Contains(err.Error(), "tau2rl_sampler_busy_seconds_total") {
		t.Fatalf("err %v", err)
	}
}

func TestModelName(t *testing.T) {
	for _, c := range []struct {
		cfg  ExperimentConfig
		want string
	}{
		{ExperimentConfig{ModelConfig: "deploy/models/qwen3-1.7b/config.json"}, "qwen3-1.7b"},
		{ExperimentConfig{ModelConfig: "deploy/models/qwen3-0.6b/config.json", ModelPath: "/ckpt/Qwen3-0.6B/"}, "Qwen3-0.6B"},
	} {
		if got := modelName(c.cfg); got != c.want {
			t.Errorf("modelName(%+v) = %s, want %s", c.cfg, got, c.want)
		}
	}
}

// TestGPUTimeInReport: finishGPUTime turns a timeline into report.json's grpo.gpu_time (with the
// accounting's trained share and the steps' staleness), report.md's section and perf.json.
func TestGPUTimeInReport(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../schemas/report/testdata/gputime.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tlPath := filepath.Join(dir, report.TimelineFile)
	if err := os.WriteFile(tlPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(dir, "ckpt")
	for i, m := range []map[string]float64{{"staleness_mean": 0.5, "staleness_max": 1}, {"staleness_mean": 1.5, "staleness_max": 2}} {
		if err := steplog.Append(ckpt, steplog.Record{Kind: "grpo", Step: int64(i + 1), Version: int64(i + 1), Metrics: m}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultExperimentConfig()
	cfg.ModelConfig = "../models/qwen3-tiny/config.json"
	e := &experiment{cfg: cfg, dir: dir, out: io.Discard, start: time.Now()}
	e.rep.GRPO.StepsLog = filepath.Join(ckpt, steplog.FileName)
	e.rep.GRPO.Accounting = report.Accounting{Produced: 10, Trained: 8, TrainedShare: 0.8}
	tl := &timeline{path: tlPath, f: mustOpen(t, tlPath), cancel: func() {}}
	if err := e.finishGPUTime(tl); err != nil {
		t.Fatal(err)
	}
	g := e.rep.GRPO.GPUTime
	if g == nil || g.Loop.TrainedShare != 0.8 || g.Loop.StalenessMean != 1 || g.Loop.StalenessMax != 2 || g.Loop.EpisodesPerS != 1 {
		t.Fatalf("gpu_time %+v", g)
	}
	pb, err := os.ReadFile(filepath.Join(dir, PerfFile))
	if err != nil {
		t.Fatal(err)
	}
	var p Perf
	if err := json.Unmarshal(pb, &p); err != nil || strings.Count(string(pb), "\n") != 1 {
		t.Fatalf("perf.json %q: %v", pb, err)
	}
	if p.Model != "qwen3-tiny" || p.Params <= 0 || p.GPUs != 1 || p.Layout != "1gpu-shared" || p.Card != "NVIDIA H100 80GB HBM3" ||
		p.EpisodesPerS != 1 || !near(p.SyncShare, 0.05) || !near(p.IdleShare["sampler"], 0.425) || !near(p.IdleShare["trainer"], 0.6) ||
		p.Offpolicyness != cfg.Offpolicyness || p.Commit == "" || p.GPUUtil["0"] != 65 || p.EpisodesInFlight != 8 || p.OnSamplerShare != 0.25 {
		t.Errorf("perf.json %+v", p)
	}
	if err := e.writeReport(); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"GPU time over 4s of GRPO", "1 episodes/s", "80% of produced episodes trained on",
		"| sampler 127.0.0.1:9001 | decode 37.5%", "8.0 episodes were in flight and 2.0 policy calls", "on a sampler 25% of its time", "| 42.5% |", "| GPU 0 (NVIDIA H100 80GB HBM3, nvidia-smi) | 65% mean utilisation"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func mustOpen(t *testing.T, path string) *os.File {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
