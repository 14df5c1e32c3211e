package localrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"tau2rl/lib/proc"
)

// start launches bin with args, its output in dir/name.log; metricsAddr "" passes no
// --metrics-addr (one-shot commands keep their own default, off).
func start(dir, bin, name, metricsAddr string, args ...string) (*proc.Proc, error) {
	return proc.Start(&proc.Spec{Name: name, Bin: bin, Args: args, LogDir: dir,
		MetricsAddr: metricsAddr, NoMetricsAddr: metricsAddr == ""})
}

// NewRunDir creates a fresh directory for one run under parent, named for
// now (UTC, to the second). A second run started within the same second gets
// "-2", "-3", … instead of sharing, and mixing its logs and dataset into, the
// first one's directory.
func NewRunDir(parent string, now time.Time) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	base := filepath.Join(parent, now.UTC().Format("20060102-150405"))
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return filepath.Abs(dir)
		}
		if !errors.Is(err, fs.ErrExist) || i > 1000 {
			return "", fmt.Errorf("run directory: %w", err)
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}

// pipeline holds the running processes of one run.
type pipeline struct {
	cfg   Config
	dir   string
	out   io.Writer // progress and the summary
	bin   func(string) string
	procs []*proc.Proc // in start order; stopped in reverse, producer first

	broker, llm, archiver, trainer, producer *proc.Proc
	brokerAddr, llmAddr                      string
	dataset, checkpoints                     string
	// taskIDs are the split's gradable tasks (runTasks), as a YAML list for admission; "" when
	// they are the whole split.
	taskIDs string
}

// admissionTasks is the trainer's admission.tasks: the split, restricted to taskIDs if set.
func (p *pipeline) admissionTasks() string {
	if p.taskIDs == "" {
		return fmt.Sprintf("admission.tasks=[{domain: %s, split: %s}]", p.cfg.Domain, p.cfg.Split)
	}
	return fmt.Sprintf("admission.tasks=[{domain: %s, split: %s, task_ids: %s}]", p.cfg.Domain, p.cfg.Split, p.taskIDs)
}

// RunPipeline runs the pipeline in dir (a fresh run directory, NewRunDir) until the trainer has
// taken cfg.Steps steps, printing progress to out; then it stops the processes gracefully (the
// producer first, the archiver once it has caught up) and prints the summary read back from the
// dataset and the checkpoints. Every process it started is stopped, also on failure.
func RunPipeline(ctx context.Context, cfg Config, dir string, out io.Writer) (err error) {
	abs, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return err
	}
	p := &pipeline{cfg: cfg, dir: dir, out: out, bin: func(name string) string { return filepath.Join(abs, name) },
		dataset: filepath.Join(dir, "dataset"), checkpoints: filepath.Join(dir, "checkpoints")}
	fmt.Fprintf(p.out, "tau2-run: run directory %s (logs: *.log)\n", dir)
	if p.taskIDs, err = runTasks(out, cfg.DataDir, cfg.Domain, cfg.Split); err != nil {
		return err
	}
	defer func() {
		if stopErr := p.stopAll(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err := p.startAll(ctx); err != nil {
		return err
	}
	started := time.Now()
	tl := p.startGPUTime() // gputime.jsonl and its summary line (gputime.go)
	defer func() { _ = tl.stop() }()
	if err := p.watch(ctx, started); err != nil {
		return err
	}
	p.finishGPUTime(tl)
	// Graceful stop: the producer first (it finishes or hands back its
	// episodes), then the archiver once it has caught up, then the rest.
	fmt.Fprintln(p.out, "tau2-run: target reached; stopping the producer (SIGTERM) and letting the archiver catch up")
	if err := p.producer.Stop(90 * time.Second); err != nil {
		return err
	}
	p.waitArchived(ctx, 30*time.Second)
	for _, q := range []*proc.Proc{p.trainer, p.archiver} {
		if err := q.Stop(60 * time.Second); err != nil {
			return err
		}
	}
	return p.summary(ctx, time.Since(started))
}

// startAll launches the processes in dependency order and waits for each to be healthy.
func (p *pipeline) startAll(ctx context.Context) error {
	var err error
	addr := func() string {
		a, e := proc.FreeAddr()
		if e != nil && err == nil {
			err = e
		}
		return a
	}
	p.brokerAddr, p.llmAddr = addr(), addr()
	m := [5]string{addr(), addr(), addr(), addr(), addr()}
	if err != nil {
		return err
	}
	brokers := "kafka.brokers=[" + p.brokerAddr + "]"
	c := p.cfg
	steps := []struct {
		name, bin, metrics string
		slot               **proc.Proc
		args               []string
	}{
		{"broker", "tau2-broker", m[0], &p.broker, []string{
			"addr=" + p.brokerAddr, "data_dir=" + filepath.Join(p.dir, "kafka")}},
		{"scripted-llm", "tau2-scripted-llm", m[1], &p.llm, []string{
			"addr=" + p.llmAddr, fmt.Sprintf("agent_error_rate=%g", c.AgentErrorRate), "domain=" + c.Domain, "data_dir=" + c.DataDir}},
		{"archiver", "tau2-archiver", m[2], &p.archiver, []string{
			brokers, "dataset_dir=" + p.dataset, "roll.max_age=5s"}},
		{"trainer", "tau2-trainer", m[3], &p.trainer, []string{
			// max_steps: the trainer stops on its own at the target instead of starting a step
			// that SIGTERM would then have to wait for (tens of seconds on the pure-Go backend).
			brokers, "checkpoint.dir=" + p.checkpoints, fmt.Sprintf("max_steps=%d", c.Steps),
			fmt.Sprintf("batch_size=%d", c.BatchSize), fmt.Sprintf("group.group_size=%d", c.GroupSize),
			p.admissionTasks(),
			"model.config=" + c.ModelConfig, "data_dir=" + c.DataDir,
			"reload.backend=sglang", "reload.endpoints=[http://" + p.llmAddr + "]"}},
		{"producer", "tau2-producer", m[4], &p.producer, []string{
			brokers, "mode=tau2", fmt.Sprintf("concurrency=%d", c.Concurrency), "data_dir=" + c.DataDir,
			"policy.endpoints=[http://" + p.llmAddr + "]", "user_llm_base_url=http://" + p.llmAddr + "/v1",
			"econfig.retrieval_config=" + strconv.Quote(c.RetrievalConfig)}},
	}
	for _, s := range steps {
		q, err := start(p.dir, p.bin(s.bin), s.name, s.metrics, s.args...)
		if err != nil {
			return err
		}
		*s.slot = q
		p.procs = append(p.procs, q)
		if err := q.WaitHealthy(ctx, 60*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(p.out, "tau2-run: %-13s up (metrics http://%s/metrics)\n", s.name, s.metrics)
	}
	return nil
}

// watch prints progress until the trainer has taken the configured steps.
func (p *pipeline) watch(ctx context.Context, started time.Time) error {
	deadline := time.After(p.cfg.Timeout)
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	var lastLine string
	var lastPrint time.Time
	infraExplained := false
	stall := newStallWatch(time.Now())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("timed out after %s before the trainer took %d steps; see the logs in %s", p.cfg.Timeout, p.cfg.Steps, p.dir)
		case <-tick.C:
		}
		for _, q := range p.procs {
			ok, err := q.Exited()
			switch {
			case ok && q == p.trainer && err == nil: // max_steps reached: it checkpointed and stopped
				fmt.Fprintf(p.out, "[%5.0fs] trainer took its %d steps and stopped\n", time.Since(started).Seconds(), p.cfg.Steps)
				return nil
			case ok:
				return fmt.Errorf("%s exited unexpectedly (%v); last lines of %s:\n%s", q.Name, err, q.LogPath, q.Tail(20))
			}
		}
		pr, _ := p.producer.Scrape()
		ar, _ := p.archiver.Scrape()
		tr, _ := p.trainer.Scrape()
		episodes := pr["tau2rl_producer_episodes_finished_total"]
		rewardSum, rewardN := pr["tau2rl_producer_reward_sum"], pr["tau2rl_producer_reward_count"]
		mean := 0.0
		if rewardN > 0 {
			mean = rewardSum / rewardN
		}
		line := fmt.Sprintf("episodes %4.0f (mean reward %.2f, infra errors %.0f) | archived %4.0f rows in %2.0f files | trainer step %.0f/%d, policy v%.0f, tree ratio %.2f",
			episodes, mean, pr["tau2rl_producer_infra_errors_total"],
			ar["tau2rl_archiver_rows_written_total"], ar["tau2rl_archiver_files_written_total"],
			tr["tau2rl_trainer_steps_total"], p.cfg.Steps, tr["tau2rl_trainer_policy_version"], tr["tau2rl_trainer_tree_token_ratio"])
		// A line when something changed, and a heartbeat while the trainer computes a step.
		if line != lastLine || time.Since(lastPrint) >= 15*time.Second {
			fmt.Fprintf(p.out, "[%5.0fs] %s\n", time.Since(started).Seconds(), line)
			lastLine, lastPrint = line, time.Now()
		}
		if n := pr["tau2rl_producer_infra_errors_total"]; n > 0 && !infraExplained {
			fmt.Fprintln(p.out, infraNote(p.producer.LogPath))
			infraExplained = true
		}
		if tr["tau2rl_trainer_steps_total"] >= float64(p.cfg.Steps) {
			return nil
		}
		if why, d := stall.observe(time.Now(), tr["tau2rl_trainer_steps_total"], func() string { return p.trainer.Tail(200) }); why != "" {
			fmt.Fprintf(p.out, "tau2-run: no trainer step for %s; the trainer says:\n    %s\n", d.Round(time.Second), why)
		}
	}
}

// infraNote explains the progress line's "infra errors" once, the first time it is not 0: they
// are episodes the producer could not run or grade (a server error, an evaluator failure), not
// rewards, and the producer's log says which and why.
func infraNote(producerLog string) string {
	return fmt.Sprintf("tau2-run: infra errors are episodes the producer could not run or grade (never rewards, never trained on); "+
		"%s says which and why (\"episode infrastructure error\")", producerLog)
}

// stallHint is how long the trainer may go without a step before tau2-run passes on why.
const stallHint = 2 * time.Minute

// trainerWaiting is what the trainer's log line says while it has no batch to train on
// (trainer/step logs it every 30 s with the ready groups, batch_size and what was dropped).
const trainerWaiting = "waiting for groups"

// stallWatch decides when to pass on why the trainer takes no step. A trainer without a step
// says why in its log every 30 s ("waiting for groups", with ready groups against batch_size
// and what was dropped); the watch passes that line on once per stall, after stallHint without
// a step, and reads the log at most once per stallHint (a long step logs nothing to pass on).
// Both tau2-run and tau2-run experiment use it.
type stallWatch struct {
	steps    float64   // the step count last observed
	since    time.Time // when it last changed
	nextLook time.Time // the earliest time to read the log again
	said     bool      // this stall's line was passed on
}

func newStallWatch(now time.Time) *stallWatch {
	return &stallWatch{steps: -1, since: now, nextLook: now.Add(stallHint)}
}

// observe takes the trainer's step count at now and returns the line to pass on ("" for none
// this time) with how long the trainer has gone without a step; tail reads the trainer's log.
func (w *stallWatch) observe(now time.Time, steps float64, tail func() string) (string, time.Duration) {
	if steps != w.steps {
		w.steps, w.since, w.nextLook, w.said = steps, now, now.Add(stallHint), false
		return "", 0
	}
	if w.said || now.Before(w.nextLook) {
		return "", 0
	}
	w.nextLook = now.Add(stallHint)
	why := lastLineWith(tail(), trainerWaiting)
	w.said = why != ""
	return why, now.Sub(w.since)
}

// lastLineWith returns the last line of text containing substr, trimmed ("" if none).
func lastLineWith(text, substr string) string {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], substr) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// waitArchived waits until the archiver's row count stops growing, so the
// summary sees everything the producer published.
func (p *pipeline) waitArchived(ctx context.Context, limit time.Duration) {
	end := time.Now().Add(limit)
	last, stable := -1.0, 0
	for time.Now().Before(end) && ctx.Err() == nil {
		ar, err := p.archiver.Scrape()
		if err == nil {
			rows := ar["tau2rl_archiver_rows_written_total"] + ar["tau2rl_archiver_duplicates_total"]
			if rows == last {
				stable++
				if stable >= 3 {
					return
				}
			} else {
				stable = 0
			}
			last = rows
		}
		time.Sleep(time.Second)
	}
}

// stopAll stops whatever still runs, newest first.
func (p *pipeline) stopAll() error {
	var errs []error
	for i := len(p.procs) - 1; i >= 0; i-- {
		if err := p.procs[i].Stop(60 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logHint lists the run's log files, for error messages.
func (p *pipeline) logHint() string {
	var names []string
	for _, q := range p.procs {
		names = append(names, q.LogPath)
	}
	return strings.Join(names, " ")
}
