package localrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"tau2rl/lib/proc"
	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
)

// The GRPO stage's timeline (issue 29, "GPU time accounted for"): while the loop runs, a
// timeline scrapes every sampler, the trainer and the producer every scrapeEvery, and, when
// nvidia-smi is on PATH, reads every GPU's utilisation and memory every smiEvery; each reading is
// one line of gputime.jsonl in the run directory (schemas/report's TimelineSample). The
// samplers' and the trainer's busy time comes from their own timers (the engine's steps, the
// trainer's phases), so it says what each process did; nvidia-smi's utilisation is the
// cross-check that the GPU did it (a kernel ran in the sample period). A source that does not
// answer a scrape is skipped for that round (and named once in the run's output): the summary
// uses the readings it has. So a trainer that stops itself at max_steps is summarised up to its
// last reading, at most scrapeEvery before it exited (a run bounded by grpo_time reads it to the
// end).

const (
	scrapeEvery = 2 * time.Second
	smiEvery    = time.Second
)

// smiQuery is the nvidia-smi query of the timeline: one CSV line per GPU per period (as
// gpu/cuda/sample-clocks.sh reads clocks and power, with --format=csv,noheader,nounits).
const smiQuery = "index,name,utilization.gpu,memory.used,memory.total"

// timelineSource is one process to scrape: its role, its name in the timeline and its metrics
// address (host:port serving /metrics).
type timelineSource struct {
	role, name, addr string
}

// timeline appends readings to gputime.jsonl until stop.
type timeline struct {
	path    string
	start   time.Time
	sources []timelineSource
	warn    func(format string, args ...any)

	mu     sync.Mutex
	f      *os.File
	werr   error
	warned map[string]bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// startTimeline opens dir/gputime.jsonl, takes a first reading of every source and keeps reading
// until stop. smi is the nvidia-smi binary ("" or not found: no GPU readings). warn says, once
// per source, that a reading failed.
func startTimeline(dir string, sources []timelineSource, smi string, warn func(string, ...any)) (*timeline, error) {
	path := filepath.Join(dir, report.TimelineFile)
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &timeline{path: path, start: time.Now(), sources: sources, warn: warn, f: f, warned: map[string]bool{}, cancel: cancel}
	t.scrapeAll()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		tick := time.NewTicker(scrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.scrapeAll()
			}
		}
	}()
	if smi != "" {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.readSMI(ctx, smi)
		}()
	}
	return t, nil
}

// stop takes a last reading of every source, ends the readers and closes the file; later calls
// do nothing. It returns the first write error.
func (t *timeline) stop() error {
	if t == nil { // the stage ran without a timeline
		return nil
	}
	t.once.Do(func() {
		t.cancel()
		t.wg.Wait()
		t.scrapeAll()
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := t.f.Close(); err != nil && t.werr == nil {
			t.werr = fmt.Errorf("timeline: %w", err)
		}
	})
	return t.werr
}

func (t *timeline) since() float64 { return time.Since(t.start).Seconds() }

func (t *timeline) write(s report.TimelineSample) {
	b, err := json.Marshal(s)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		_, err = t.f.Write(append(b, '\n'))
	}
	if err != nil && t.werr == nil {
		t.werr = fmt.Errorf("timeline: %s: %w", t.path, err)
	}
}

func (t *timeline) warnOnce(key, format string, args ...any) {
	t.mu.Lock()
	seen := t.warned[key]
	t.warned[key] = true
	t.mu.Unlock()
	if !seen && t.warn != nil {
		t.warn(format, args...)
	}
}

func (t *timeline) scrapeAll() {
	for _, src := range t.sources {
		ts := t.since()
		body, err := getMetrics(src.addr)
		if err == nil {
			var s report.TimelineSample
			if s, err = sampleOf(src.role, src.name, body); err == nil {
				s.T = ts
				t.write(s)
				continue
			}
		}
		t.warnOnce(src.role+src.name, "   timeline: %s %s not read (%v); its share is computed from the readings it answered", src.role, src.name, err)
	}
}

var metricsClient = &http.Client{Timeout: 2 * time.Second}

// getMetrics reads addr's /metrics once (every series a sample needs comes from one reading).
func getMetrics(addr string) ([]byte, error) {
	resp, err := metricsClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// sampleOf turns one /metrics reading of a role's process into a timeline sample (T unset).
func sampleOf(role, name string, body []byte) (report.TimelineSample, error) {
	s := report.TimelineSample{Role: role, Name: name}
	all, err := proc.ParseSample(bytes.NewReader(body), "", "")
	if err != nil {
		return s, err
	}
	where := func(label, value string) proc.Sample {
		m, _ := proc.ParseSample(bytes.NewReader(body), label, value) // parsed once above: no error
		return m
	}
	busy := func(metric string) (map[string]float64, error) {
		by, err := proc.ParseBy(bytes.NewReader(body), metric, "phase")
		if err == nil && len(by) == 0 {
			err = fmt.Errorf("no %s (a build without the busy-time counters)", metric)
		}
		return by, err
	}
	switch role {
	case report.RoleSampler:
		if s.Busy, err = busy("tau2rl_sampler_busy_seconds_total"); err != nil {
			return s, err
		}
		s.Counts = map[string]float64{
			report.CountCalls:           all["tau2rl_sampler_requests_total"],
			report.CountGeneratedTokens: all["tau2rl_sampler_generation_tokens_total"],
			report.CountPromptTokens:    all["tau2rl_sampler_prompt_tokens_total"],
		}
	case report.RoleTrainer:
		if s.Busy, err = busy("tau2rl_trainer_busy_seconds_total"); err != nil {
			return s, err
		}
		s.Counts = map[string]float64{report.CountSteps: all["tau2rl_trainer_steps_total"]}
	case report.RoleProducer:
		agent := where("role", "agent")
		s.Counts = map[string]float64{
			report.CountEpisodes:        all["tau2rl_producer_episodes_finished_total"],
			report.CountCalls:           agent["tau2rl_producer_llm_call_seconds_count"],
			report.CountGeneratedTokens: where("kind", "completion")["tau2rl_producer_tokens_total"],
			report.CountEpisodeSeconds:  all["tau2rl_producer_episode_seconds_sum"],
			report.CountAgentSeconds:    agent["tau2rl_producer_llm_call_seconds_sum"],
		}
	default:
		return s, fmt.Errorf("timeline: unknown role %q", role)
	}
	return s, nil
}

// readSMI runs nvidia-smi in its own loop mode (one process for the stage, not one per reading)
// and writes a sample per GPU line until ctx ends.
func (t *timeline) readSMI(ctx context.Context, smi string) {
	cmd := exec.CommandContext(ctx, smi, "--query-gpu="+smiQuery, "--format=csv,noheader,nounits",
		"--loop-ms="+strconv.Itoa(int(smiEvery.Milliseconds())))
	cmd.WaitDelay = time.Second // a child holding stdout open does not hold the stage
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		t.warnOnce("nvidia-smi", "   timeline: nvidia-smi not started (%v): no GPU utilisation in the report", err)
		return
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		s, err := parseSMILine(sc.Text())
		if err != nil {
			t.warnOnce("nvidia-smi-line", "   timeline: %v", err)
			continue
		}
		s.T = t.since()
		t.write(s)
	}
	_ = cmd.Wait() // killed by ctx: its exit status says nothing
}

// parseSMILine reads one line of smiQuery's CSV: index, name, utilisation %, memory used and
// total in MiB. A value nvidia-smi cannot read ("[N/A]", "[Not Supported]": a MIG slice, some
// virtual GPUs) is left out of the sample, not read as 0.
func parseSMILine(line string) (report.TimelineSample, error) {
	f := strings.Split(line, ",")
	if len(f) != 5 {
		return report.TimelineSample{}, fmt.Errorf("nvidia-smi line %q: want 5 fields (%s)", line, smiQuery)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	if f[0] == "" {
		return report.TimelineSample{}, fmt.Errorf("nvidia-smi line %q: no GPU index", line)
	}
	s := report.TimelineSample{Role: report.RoleGPU, Name: f[0], Card: f[1]}
	num := func(v string) (float64, bool) {
		x, err := strconv.ParseFloat(v, 64)
		return x, err == nil && x >= 0 && x < 1e12
	}
	if u, ok := num(f[2]); ok && u <= 100 {
		s.Util = &u
	}
	if m, ok := num(f[3]); ok {
		s.MemUsedMiB = m
	}
	if m, ok := num(f[4]); ok {
		s.MemTotalMiB = m
	}
	return s, nil
}

// timelineSources are the GRPO stage's processes: every policy sampler (when the policy is
// tau2-sampler; the scripted stand-in has no busy time of its own), each named by the address it
// serves, the trainer and the producer.
func (e *experiment) timelineSources(tr, prod *proc.Proc) []timelineSource {
	var src []timelineSource
	if e.cfg.Policy == "sampler" {
		for _, a := range e.policyAddrs {
			src = append(src, timelineSource{report.RoleSampler, a, a})
		}
	}
	return append(src, timelineSource{report.RoleTrainer, "trainer", tr.MetricsAddr},
		timelineSource{report.RoleProducer, "producer", prod.MetricsAddr})
}

// startGPUTime starts the GRPO stage's timeline; a timeline that cannot start (the run directory
// is not writable) is reported and the stage runs without one.
func (e *experiment) startGPUTime(tr, prod *proc.Proc) *timeline {
	smi, _ := exec.LookPath("nvidia-smi")
	tl, err := startTimeline(e.dir, e.timelineSources(tr, prod), smi, e.printf)
	if err != nil {
		e.printf("   no GPU-time timeline: %v", err)
		return nil
	}
	return tl
}

// finishGPUTime stops the timeline and summarises it into report.json's grpo.gpu_time, with the
// accounting's trained share and the steps' staleness at training time; then writes perf.json.
func (e *experiment) finishGPUTime(tl *timeline) error {
	if tl == nil {
		return nil
	}
	if err := tl.stop(); err != nil {
		return err
	}
	f, err := os.Open(tl.path)
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	samples, err := report.ReadTimeline(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	g := report.SummarizeTimeline(samples)
	g.Timeline = tl.path
	g.Loop.TrainedShare = e.rep.GRPO.Accounting.TrainedShare
	if e.rep.GRPO.StepsLog != "" {
		if recs, err := steplog.Read(e.rep.GRPO.StepsLog); err == nil {
			g.Loop.StalenessMean, g.Loop.StalenessMax = staleness(recs)
		}
	}
	e.rep.GRPO.GPUTime = &g
	e.printf("   GPU time: %s", gpuTimeLine(g))
	return e.writePerf(g)
}

// gpuTimeLine is the one-line summary the run prints.
func gpuTimeLine(g report.GPUTime) string {
	parts := []string{fmt.Sprintf("%.2f episodes/s, %.0f generated tokens/s, %.2f calls/s, %.1f episodes and %.1f policy calls in flight",
		g.Loop.EpisodesPerS, g.Loop.GenTokPerS, g.Loop.CallsPerS, g.Loop.EpisodesInFlight, g.Loop.CallsInFlight)}
	for _, r := range g.Roles {
		if r.Role != report.RoleProducer {
			parts = append(parts, fmt.Sprintf("%s %s idle %.0f%%", r.Role, r.Name, 100*r.IdleShare))
		}
	}
	for _, u := range g.GPUs {
		parts = append(parts, fmt.Sprintf("GPU %s %.0f%% utilised", u.Index, u.MeanUtil))
	}
	return strings.Join(parts, "; ")
}

// staleness is the staleness at training time over the steps: the mean of the steps'
// staleness_mean (each a mean over its loss tokens) and the largest staleness_max. Steps logged
// before the trainer wrote staleness_mean count in the maximum only.
func staleness(recs []steplog.Record) (mean, maxLag float64) {
	n := 0
	for _, r := range recs {
		if v, ok := r.Metrics["staleness_mean"]; ok {
			mean += v
			n++
		}
		maxLag = max(maxLag, r.Metrics["staleness_max"])
	}
	if n > 0 {
		mean /= float64(n)
	}
	return mean, maxLag
}

// writeGPUTime is report.md's GPU time section: the loop's rates, each role's busy shares by
// phase and idle share, each GPU's mean utilisation.
func writeGPUTime(s *strings.Builder, g *report.GPUTime) {
	if g == nil {
		return
	}
	l := g.Loop
	fmt.Fprintf(s, "\nGPU time over %.0fs of GRPO (timeline: %s): %.3g episodes/s, %.3g generated tokens/s, %.3g policy calls/s, "+
		"%.0f%% of produced episodes trained on, staleness at training time %.2f (max %.0f), weight sync %.1f%% and checkpoints %.1f%% of the trainer's wall time.\n\n",
		g.WallSeconds, filepath.Base(g.Timeline), l.EpisodesPerS, l.GenTokPerS, l.CallsPerS, 100*l.TrainedShare, l.StalenessMean, l.StalenessMax,
		100*l.SyncShare, 100*l.CheckpointShare)
	fmt.Fprintf(s, "On average %.1f episodes were in flight and %.1f policy calls: an episode had a call on a sampler %.0f%% of its time "+
		"(the producers' concurrency rule, docs/OPERATIONS.md, divides the conversations a sampler should hold by this share).\n\n",
		l.EpisodesInFlight, l.CallsInFlight, 100*l.OnSamplerShare)
	fmt.Fprintf(s, "| role | busy share by phase | idle |\n|---|---|---|\n")
	for _, r := range g.Roles {
		if r.Role == report.RoleProducer {
			continue
		}
		phases := make([]string, 0, len(r.BusyShare))
		for _, p := range slicesSorted(r.BusyShare) {
			phases = append(phases, fmt.Sprintf("%s %.1f%%", p, 100*r.BusyShare[p]))
		}
		fmt.Fprintf(s, "| %s %s | %s | %.1f%% |\n", r.Role, r.Name, strings.Join(phases, ", "), 100*r.IdleShare)
	}
	for _, u := range g.GPUs {
		fmt.Fprintf(s, "| GPU %s (%s, nvidia-smi) | %.0f%% mean utilisation, %.0f of %.0f MiB at most | |\n", u.Index, u.Card, u.MeanUtil, u.MaxMemMiB, u.MemTotalMiB)
	}
	if len(g.GPUs) == 0 {
		fmt.Fprintf(s, "\n(no nvidia-smi on PATH: the shares are the processes' own timers only)\n")
	}
}

func slicesSorted(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// startGPUTime starts the plain pipeline's timeline: the trainer and the producer (its policy is
// the scripted server, which has no busy time), and the GPUs when nvidia-smi is on PATH.
func (p *pipeline) startGPUTime() *timeline {
	smi, _ := exec.LookPath("nvidia-smi")
	warn := func(format string, args ...any) { fmt.Fprintf(p.out, "tau2-run:"+format+"\n", args...) }
	tl, err := startTimeline(p.dir, []timelineSource{{report.RoleTrainer, "trainer", p.trainer.MetricsAddr},
		{report.RoleProducer, "producer", p.producer.MetricsAddr}}, smi, warn)
	if err != nil {
		warn("   no GPU-time timeline: %v", err)
		return nil
	}
	return tl
}

// finishGPUTime stops the pipeline's timeline and prints its summary line.
func (p *pipeline) finishGPUTime(tl *timeline) {
	if tl == nil {
		return
	}
	err := tl.stop()
	var samples []report.TimelineSample
	if err == nil {
		var f *os.File
		if f, err = os.Open(tl.path); err == nil {
			samples, err = report.ReadTimeline(f)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(p.out, "tau2-run: GPU-time timeline: %v\n", err)
		return
	}
	fmt.Fprintf(p.out, "tau2-run: GPU time (%s): %s\n", tl.path, gpuTimeLine(report.SummarizeTimeline(samples)))
}
