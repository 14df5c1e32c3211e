package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"tau2rl/lib/proc"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/checkpoint"
)

// ExperimentConfig is tau2-run experiment's configuration (its keys are the command's); the
// type is report.json's (schemas/report), so that the figures read what the experiment wrote.
type ExperimentConfig = report.ExperimentConfig

// DefaultExperimentConfig returns the settings of the run in docs/LEARNING.md.
func DefaultExperimentConfig() ExperimentConfig {
	return ExperimentConfig{
		// The recipe of docs/LEARNING.md ("The recipe", 2026-11-28: three seeds on one H200, each
		// about 7.5 minutes end to end): rejection-sampled SFT of qwen3-learn-100m on the
		// successful demonstrations, then GRPO at a learning rate that keeps the SFT policy (4e-5
		// collapsed it after ~30 steps in all three seeds).
		Bin: "bin", Dir: "run", Domain: "airline", Split: "train", WriteTasksOnly: true, DemoTrials: 64, AgentErrorRate: 0.6,
		ErrorKinds: []string{"wrong_argument", "skipped_write"},
		Policy:     "sampler", Backend: "cuda", ModelConfig: "deploy/models/qwen3-learn-100m/config.json",
		// One GPU that the sampler and the trainer share: the sampler's KV cache takes 30% of
		// what the weights leave, not its standalone default (layoutFor, sharedKVFraction).
		GPUs: 1, Samplers: 1,
		SFTEpochs: 8, SFTLR: 6e-4, SFTBatchTokens: 131072, SFTMinReward: ptr(1.0),
		GRPOSteps: 50, GroupSize: 8, BatchSize: 8, GRPOLR: 1e-5, GRPOWarmup: 5, MaxNewToken: 512,
		EvalTrials: 8, EvalTemperature: 1, Concurrency: 96, Timeout: 30 * time.Minute,
		Seed: 1, GRPOTemperature: 1, Offpolicyness: 2,
	}
}

func ptr[T any](v T) *T { return &v }

// experiment is one run's processes and results.
type experiment struct {
	cfg   ExperimentConfig
	dir   string
	out   io.Writer
	procs []*proc.Proc
	start time.Time

	brokers, llmAddr string
	// policyAddrs are the policy's servers: every sampler's listen address (samplers holds
	// their processes), or the scripted server's.
	policyAddrs []string
	samplers    []*proc.Proc
	layout      layout
	rep         Report
	// demoRewards are the demonstrations' rewards, read once from the release (their mean is
	// report.json's; sft_min_reward counts from them).
	demoRewards []float64
}

// report.json's types (schemas/report): one definition for the experiment that writes it and the
// figures that read it.
type (
	Report     = report.Report
	DemoStats  = report.DemoStats
	SFTStats   = report.SFTStats
	EvalStats  = report.EvalStats
	EvalProbe  = report.EvalProbe
	RewardStat = report.RewardStat
	GRPOStats  = report.GRPOStats
)

// RunExperiment runs every stage of the experiment in dir (a fresh run directory, NewRunDir),
// each binary of cfg.Bin its own process, printing progress to out; it ends with report.md and
// report.json in dir, and stops every process it started, also on failure.
func RunExperiment(ctx context.Context, cfg ExperimentConfig, dir string, out io.Writer) (err error) {
	e := &experiment{cfg: cfg, dir: dir, out: out, start: time.Now(), rep: Report{Config: cfg, Stages: map[string]float64{}}}
	if e.layout, err = layoutFor(cfg, os.Getenv("CUDA_VISIBLE_DEVICES")); err != nil {
		return err
	}
	e.printf("tau2-run experiment: run directory %s (logs: *.log), layout %s", dir, e.layout.Name)
	defer func() {
		if stopErr := e.stopAll(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	stage := func(name string, f func(context.Context) error) error {
		t0 := time.Now()
		e.printf("== %s", name)
		if err := f(ctx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		e.rep.Stages[name] = time.Since(t0).Seconds()
		e.printf("   %s done in %s", name, time.Since(t0).Round(time.Second))
		return nil
	}
	for _, s := range []struct {
		name string
		f    func(context.Context) error
	}{
		{"services", e.services},
		{"demonstrations", e.demonstrations},
		{"sft", e.sft},
		{"policy server", e.policyServer},
		{"eval before", e.evalBefore},
		{"grpo", e.grpo},
		{"eval after", e.evalAfter},
	} {
		if err := stage(s.name, s.f); err != nil {
			return err
		}
	}
	if err := stage("figures", e.figures); err != nil {
		return err
	}
	return e.writeReport()
}

func (e *experiment) printf(format string, args ...any) {
	fmt.Fprintf(e.out, "[%5.0fs] "+format+"\n", append([]any{time.Since(e.start).Seconds()}, args...)...)
}

func (e *experiment) bin(name string) string { return filepath.Join(e.cfg.Bin, name) }

// daemon starts a long-running process and waits until it is healthy.
func (e *experiment) daemon(ctx context.Context, name, bin string, args ...string) (*proc.Proc, error) {
	return e.daemonOn(ctx, placement{}, name, bin, args...)
}

// daemonOn is daemon on the devices of at.
func (e *experiment) daemonOn(ctx context.Context, at placement, name, bin string, args ...string) (*proc.Proc, error) {
	m, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	q, err := proc.Start(&proc.Spec{Name: name, Bin: e.bin(bin), Args: args, Env: at.Env, LogDir: e.dir, MetricsAddr: m})
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, q)
	if err := q.WaitHealthy(ctx, 5*time.Minute); err != nil {
		return nil, err
	}
	return q, nil
}

// oneShot runs a command to completion (its output in name.log) and returns the log's text.
func (e *experiment) oneShot(ctx context.Context, name, bin string, args ...string) (string, error) {
	q, err := start(e.dir, e.bin(bin), name, "", args...)
	if err != nil {
		return "", err
	}
	select {
	case <-q.Done():
	case <-ctx.Done():
		_ = q.Stop(30 * time.Second)
		return "", fmt.Errorf("%s: %w", name, ctx.Err())
	}
	b, _ := os.ReadFile(q.LogPath)
	if _, err := q.Exited(); err != nil {
		return string(b), fmt.Errorf("%s failed (%v); last lines of %s:\n%s", name, err, q.LogPath, q.Tail(20))
	}
	return string(b), nil
}

func (e *experiment) stopAll() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		if err := e.procs[i].Stop(60 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	e.procs = nil
	return errors.Join(errs...)
}

// stopProc stops one daemon and forgets it.
func (e *experiment) stopProc(q *proc.Proc, grace time.Duration) error {
	for i, p := range e.procs {
		if p == q {
			e.procs = append(e.procs[:i], e.procs[i+1:]...)
			break
		}
	}
	return q.Stop(grace)
}

// services starts the broker and the scripted server (the user simulator in every stage, the
// demonstrator, and with policy=scripted the policy).
func (e *experiment) services(ctx context.Context) error {
	ba, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	if _, err := e.daemon(ctx, "broker", "tau2-broker", "addr="+ba, "data_dir="+filepath.Join(e.dir, "kafka")); err != nil {
		return err
	}
	e.brokers = "kafka.brokers=[" + ba + "]"
	if e.llmAddr, err = proc.FreeAddr(); err != nil {
		return err
	}
	_, err = e.daemon(ctx, "scripted-llm", "tau2-scripted-llm", "addr="+e.llmAddr,
		fmt.Sprintf("agent_error_rate=%g", e.cfg.AgentErrorRate), "error_kinds=["+strings.Join(e.cfg.ErrorKinds, ",")+"]",
		"domain="+e.cfg.Domain, "data_dir="+e.cfg.DataDir, fmt.Sprintf("seed=%d", e.cfg.Seed))
	return err
}

// demoTopic keeps the demonstrations apart from the GRPO rollouts: the trainer and the GRPO
// archiver read only the trajectories of their own stage.
const demoTopic = "tau2.demonstrations"

func (e *experiment) archiver(ctx context.Context, name, datasetDir string, extra ...string) (*proc.Proc, error) {
	return e.daemon(ctx, name, "tau2-archiver", append([]string{e.brokers, "dataset_dir=" + datasetDir, "roll.max_age=2s",
		"group=" + name}, extra...)...)
}

// drainArchiver waits until the archiver's rows stop growing, then stops it.
func (e *experiment) drainArchiver(ctx context.Context, q *proc.Proc) error {
	last, stable := -1.0, 0
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end) && ctx.Err() == nil && stable < 3; time.Sleep(time.Second) {
		ar, err := q.Scrape()
		if err != nil {
			continue
		}
		rows := ar["tau2rl_archiver_rows_written_total"] + ar["tau2rl_archiver_duplicates_total"]
		if rows == last && rows > 0 {
			stable++
		} else {
			stable = 0
		}
		last = rows
	}
	return e.stopProc(q, 60*time.Second)
}

// taskArgs names the resolved tasks (selectTasks) to a binary's task-id list option.
func (e *experiment) taskArgs(key string) []string {
	return []string{key + "=" + yamlList(e.cfg.TaskIDs)}
}

// demonstrations: the scripted demonstrator plays the tasks, the archiver keeps them, and a
// release is cut.
func (e *experiment) demonstrations(ctx context.Context) error {
	demos := filepath.Join(e.dir, "demos")
	arch, err := e.archiver(ctx, "archiver-demos", demos, "kafka.topics.trajectories="+demoTopic)
	if err != nil {
		return err
	}
	args := append([]string{e.brokers, "kafka.topics.trajectories=" + demoTopic, "data_dir=" + e.cfg.DataDir, "econfig.domain=" + e.cfg.Domain,
		"policy.endpoints=[http://" + e.llmAddr + "]", "user_llm_base_url=http://" + e.llmAddr + "/v1",
		fmt.Sprintf("concurrency=%d", e.cfg.Concurrency), "--metrics-addr", "off",
		"self_driven.enabled=true", "self_driven.split=" + e.cfg.Split, fmt.Sprintf("self_driven.trials=%d", e.cfg.DemoTrials)},
		e.taskArgs("self_driven.task_ids")...)
	text, err := e.oneShot(ctx, "producer-demos", "tau2-producer", args...)
	if err != nil {
		return err
	}
	if m := regexp.MustCompile(`(\d+) requests, (\d+) episodes`).FindStringSubmatch(text); m != nil {
		e.printf("   producer: %s", strings.TrimSpace(m[0]))
	}
	if err := e.drainArchiver(ctx, arch); err != nil {
		return err
	}
	rel := filepath.Join(e.dir, "release")
	if _, err := e.oneShot(ctx, "release", "tau2-archiver", "release", "source="+demos, "out="+rel,
		"filter.domains=["+e.cfg.Domain+"]", "filter.splits=["+e.cfg.Split+"]", "name=demonstrations",
		fmt.Sprintf("description=scripted demonstrator, agent_error_rate %g, %d trials per task", e.cfg.AgentErrorRate, e.cfg.DemoTrials)); err != nil {
		return err
	}
	rs, err := rewards(ctx, rel)
	if err != nil {
		return err
	}
	e.demoRewards = rs
	n, sum := len(rs), 0.0
	for _, r := range rs {
		sum += r
	}
	mean := sum / float64(max(n, 1))
	e.rep.Demos = DemoStats{Episodes: n, MeanReward: mean, Release: rel}
	e.printf("   %d demonstrations, success (mean reward) %.3f → %s", n, mean, rel)
	return nil
}

// rewards reads the rewards of a release's trajectories.
func rewards(ctx context.Context, path string) ([]float64, error) {
	ds, err := dataset.Open(path)
	if err != nil {
		return nil, err
	}
	trajs, _, err := ds.ReadAll(ctx, dataset.Filter{})
	if err != nil {
		return nil, err
	}
	rs := make([]float64, len(trajs))
	for i, t := range trajs {
		rs[i] = t.Reward
	}
	return rs, nil
}

// sft trains the policy on the demonstrations (those with at least sft_min_reward when set).
func (e *experiment) sft(ctx context.Context) error {
	if m := e.cfg.SFTMinReward; m != nil {
		n := 0
		for _, r := range e.demoRewards {
			if r >= *m {
				n++
			}
		}
		if n == 0 {
			return fmt.Errorf("sft_min_reward=%g leaves none of the %d demonstrations to train on (more demo_trials, a lower agent_error_rate, or sft_min_reward=0 for all of them)",
				*m, e.rep.Demos.Episodes)
		}
		e.printf("   rejection-sampled SFT: %d of %d demonstrations have reward ≥ %g", n, e.rep.Demos.Episodes, *m)
	}
	out := filepath.Join(e.dir, "sft")
	args := []string{"dataset=" + e.rep.Demos.Release, "out=" + out, "backend=" + e.cfg.Backend,
		fmt.Sprintf("epochs=%d", e.cfg.SFTEpochs), fmt.Sprintf("optimizer.lr=%g", e.cfg.SFTLR),
		fmt.Sprintf("batch_tokens=%d", e.cfg.SFTBatchTokens), fmt.Sprintf("max_steps=%d", e.cfg.SFTMaxSteps),
		fmt.Sprintf("seed=%d", e.cfg.Seed), fmt.Sprintf("model.seed=%d", e.cfg.Seed)}
	if e.cfg.SFTMinReward != nil {
		args = append(args, "filter.min_reward="+strconv.FormatFloat(*e.cfg.SFTMinReward, 'g', -1, 64))
	}
	if e.cfg.ModelPath != "" {
		args = append(args, "model.path="+e.cfg.ModelPath)
	} else {
		args = append(args, "model.config="+e.cfg.ModelConfig)
	}
	args = append(args, e.cfg.SFTArgs...)
	if _, err := e.oneShot(ctx, "sft", "tau2-trainer", append([]string{"sft"}, args...)...); err != nil {
		return err
	}
	recs, err := steplog.Read(out)
	if err != nil {
		return err
	}
	dir, _, ok, _, err := (&checkpoint.Manager{Dir: out, Keep: 2}).Latest()
	if err != nil || !ok {
		return fmt.Errorf("no SFT checkpoint in %s: %v", out, err)
	}
	e.rep.SFT = SFTStats{Steps: len(recs), Checkpoint: dir}
	if len(recs) > 0 {
		e.rep.SFT.FirstLoss, e.rep.SFT.LastLoss = recs[0].Metrics["loss"], recs[len(recs)-1].Metrics["loss"]
	}
	e.printf("   %d SFT steps, loss %.3f → %.3f → %s", len(recs), e.rep.SFT.FirstLoss, e.rep.SFT.LastLoss, dir)
	return nil
}

// policyServer starts the layout's tau2-samplers on the SFT checkpoint, or points the policy at
// the scripted server.
func (e *experiment) policyServer(ctx context.Context) error {
	if e.cfg.Policy == "scripted" {
		e.policyAddrs = []string{e.llmAddr}
		e.printf("   policy: the scripted server stands in for the sampler (the served policy will not change)")
		return nil
	}
	for i, at := range e.layout.Samplers {
		addr, err := e.startSampler(ctx, i, at)
		if err != nil {
			return err
		}
		e.policyAddrs = append(e.policyAddrs, addr)
		on := "sharing the trainer's device"
		if at.Devices != "" {
			on = "on CUDA device " + at.Devices
		}
		e.printf("   tau2-sampler %s serves %s on %s (%s)", samplerName(i), e.rep.SFT.Checkpoint, addr, on)
	}
	return nil
}

// startSampler starts the i-th tau2-sampler where at says and waits until it serves.
func (e *experiment) startSampler(ctx context.Context, i int, at placement) (string, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return "", err
	}
	// Its metrics on a port of its own: the sampler's default (:9430) would make a second
	// sampler, or a second experiment on the same host (several seeds on one GPU), fail to start.
	metrics, err := proc.FreeAddr()
	if err != nil {
		return "", err
	}
	name := samplerName(i)
	q, err := proc.Start(&proc.Spec{Name: name, Bin: e.bin("tau2-sampler"), Args: e.samplerArgs(i, addr), Env: at.Env, LogDir: e.dir, MetricsAddr: metrics})
	if err != nil {
		return "", err
	}
	e.procs = append(e.procs, q)
	e.samplers = append(e.samplers, q)
	// SGLang's /health answers 200 once the model is loaded.
	client := &http.Client{Timeout: 2 * time.Second}
	for end := time.Now().Add(10 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if ok, err := q.Exited(); ok {
			return "", fmt.Errorf("tau2-sampler %s exited (%v); last lines of %s:\n%s", name, err, q.LogPath, q.Tail(20))
		}
		if resp, err := client.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, nil
			}
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return "", fmt.Errorf("tau2-sampler %s not healthy; last lines of %s:\n%s", name, q.LogPath, q.Tail(20))
		}
	}
}

// samplerArgs are the i-th tau2-sampler's arguments: the layout's (its KV-cache share on a GPU
// it shares with the trainer), then sampler_args (which override them).
func (e *experiment) samplerArgs(i int, addr string) []string {
	args := append([]string{"model=" + e.rep.SFT.Checkpoint, "listen=" + addr, "backend=" + e.cfg.Backend}, e.layout.SamplerArgs[i]...)
	return append(args, e.cfg.SamplerArgs...)
}

// evalBefore measures the SFT policy at eval_temperature (on the training tasks, then on the
// held-out split's when set), then at each probe temperature.
func (e *experiment) evalBefore(ctx context.Context) error {
	if err := e.eval(ctx, "before", e.cfg.EvalTemperature, &e.rep.Before); err != nil {
		return err
	}
	if err := e.evalHeldOut(ctx, "before", &e.rep.BeforeHeldOut); err != nil {
		return err
	}
	for _, t := range e.cfg.ProbeTemperatures {
		p := EvalProbe{Temperature: t}
		if err := e.eval(ctx, "before-t"+strconv.FormatFloat(t, 'g', -1, 64), t, &p.Eval); err != nil {
			return err
		}
		e.rep.BeforeProbes = append(e.rep.BeforeProbes, p)
	}
	return nil
}

// evalAfter measures the policy GRPO left, as evalBefore (no probes).
func (e *experiment) evalAfter(ctx context.Context) error {
	if err := e.eval(ctx, "after", e.cfg.EvalTemperature, &e.rep.After); err != nil {
		return err
	}
	return e.evalHeldOut(ctx, "after", &e.rep.AfterHeldOut)
}

// evalHeldOut evaluates on heldout_split's tasks, when it is set.
func (e *experiment) evalHeldOut(ctx context.Context, when string, into **EvalStats) error {
	if e.cfg.HeldOutSplit == "" || e.cfg.EvalTrials == 0 {
		return nil
	}
	st := &EvalStats{}
	if err := e.evalOn(ctx, when+"-"+e.cfg.HeldOutSplit, e.cfg.HeldOutSplit, e.cfg.HeldOutTaskIDs, e.cfg.EvalTemperature, st); err != nil {
		return err
	}
	*into = st
	return nil
}

var passRow = regexp.MustCompile(`(?m)^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)((?:\s+[0-9.]+|\s+-)*)\s*$`)

// eval runs tau2-eval run on the tasks at the given sampling temperature and parses its pass^k
// row; with eval_trials 0 it measures nothing (a throughput run).
func (e *experiment) eval(ctx context.Context, name string, temperature float64, into *EvalStats) error {
	if e.cfg.EvalTrials == 0 {
		e.printf("   eval_trials=0: not evaluated")
		return nil
	}
	return e.evalOn(ctx, name, e.cfg.Split, e.cfg.TaskIDs, temperature, into)
}

// evalOn runs tau2-eval run on the given split's tasks (ids) and parses its pass^k row.
func (e *experiment) evalOn(ctx context.Context, name, split string, ids []string, temperature float64, into *EvalStats) error {
	text, err := e.oneShot(ctx, "eval-"+name, "tau2-eval", append([]string{"run"}, e.evalArgs(name, split, ids, temperature)...)...)
	if err != nil {
		return err
	}
	for _, m := range passRow.FindAllStringSubmatch(text, -1) {
		if m[1] != e.cfg.Domain {
			continue
		}
		into.Tasks, _ = strconv.Atoi(m[2])
		into.Simulations, _ = strconv.Atoi(m[3])
		into.Infra, _ = strconv.Atoi(m[4])
		into.Avg, _ = strconv.ParseFloat(m[5], 64)
		for _, f := range strings.Fields(m[6]) {
			v, _ := strconv.ParseFloat(f, 64)
			into.PassK = append(into.PassK, v)
		}
	}
	if into.Simulations == 0 {
		return fmt.Errorf("no pass^k row for %s in the output of tau2-eval run (see %s)", e.cfg.Domain, filepath.Join(e.dir, "eval-"+name+".log"))
	}
	e.printf("   %s: %d tasks × %d trials at temperature %g: avg reward %.3f, pass^k %s (infra errors %d)", split, into.Tasks, e.cfg.EvalTrials, temperature,
		into.Avg, rounded(into.PassK), into.Infra)
	return nil
}

// evalArgs are tau2-eval run's arguments for one evaluation: every sampler in policy.endpoints.
func (e *experiment) evalArgs(name, split string, ids []string, temperature float64) []string {
	return []string{"econfig.domain=" + e.cfg.Domain, "split=" + split, "data_dir=" + e.cfg.DataDir,
		fmt.Sprintf("num_trials=%d", e.cfg.EvalTrials), fmt.Sprintf("concurrency=%d", e.cfg.Concurrency),
		"policy.endpoints=" + endpoints(e.policyAddrs), "econfig.user_llm_base_url=http://" + e.llmAddr + "/v1",
		fmt.Sprintf("sampling.temperature=%g", temperature), fmt.Sprintf("policy.max_new_tokens=%d", e.cfg.MaxNewToken),
		// Each trial's seed goes with its policy requests: the same trials sampled the same way
		// in every run and evaluation, so before/after and seed-to-seed differences are the policy's.
		"policy.send_seed=true",
		"output=" + filepath.Join(e.dir, "eval-"+name+".json"), "task_ids=" + yamlList(ids)}
}

// grpo runs the RL pipeline until the trainer has taken grpo_steps steps.
func (e *experiment) grpo(ctx context.Context) error {
	ds := filepath.Join(e.dir, "grpo")
	ckpt := filepath.Join(e.dir, "grpo-checkpoints")
	arch, err := e.archiver(ctx, "archiver-grpo", ds)
	if err != nil {
		return err
	}
	t0 := time.Now()
	tr, err := e.daemonOn(ctx, e.layout.Trainer, "trainer", "tau2-trainer", e.trainerArgs(ckpt)...)
	if err != nil {
		return err
	}
	prod, err := e.daemon(ctx, "producer", "tau2-producer", e.producerArgs()...)
	if err != nil {
		return err
	}
	tl := e.startGPUTime(tr, prod) // gputime.jsonl, report.json's grpo.gpu_time (gputime.go)
	defer func() { _ = tl.stop() }()
	var lastLine string
	stall := newStallWatch(time.Now())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
		// A sampler that dies (out of memory on its GPU, say) ends the stage with its log's tail,
		// not with the producer's retries against it.
		for _, q := range append([]*proc.Proc{arch, tr, prod}, e.samplers...) {
			if ok, err := q.Exited(); ok && q != tr {
				return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", q.Name, err, q.LogPath, q.Tail(20))
			}
		}
		if ok, err := tr.Exited(); ok { // max_steps reached: the trainer stops on its own
			if err != nil {
				return fmt.Errorf("trainer: %v; last lines of %s:\n%s", err, tr.LogPath, tr.Tail(20))
			}
			break
		}
		recs, _ := steplog.Read(ckpt)
		if e.cfg.GRPOTime > 0 && time.Since(t0) >= e.cfg.GRPOTime {
			e.printf("   grpo_time %s reached after %d of %d steps: stopping GRPO (the policy server keeps version %d)",
				e.cfg.GRPOTime, len(recs), e.cfg.GRPOSteps, len(recs))
			break
		}
		pr, _ := prod.Scrape()
		line := fmt.Sprintf("   episodes %4.0f | trainer step %d/%d", pr["tau2rl_producer_episodes_finished_total"], len(recs), e.cfg.GRPOSteps)
		if len(recs) > 0 {
			m := recs[len(recs)-1].Metrics
			line += fmt.Sprintf(", reward %.3f, |behav−prox| %.4f, capped %.4f", m["reward"], m["behav_abs_diff"], m["behav_cap_fraction"])
		}
		if line != lastLine {
			e.printf("%s", line)
			lastLine = line
		}
		if why, d := stall.observe(time.Now(), float64(len(recs)), func() string { return tr.Tail(200) }); why != "" {
			e.printf("   no trainer step for %s; the trainer says:\n    %s", d.Round(time.Second), why)
		}
	}
	e.rep.GRPO.WallSeconds = time.Since(t0).Seconds()
	_ = tl.stop() // the loop's span only; finishGPUTime reports a write error
	e.samplerStats(ckpt)
	if recs, _ := steplog.Read(ckpt); len(recs) == 0 {
		e.rep.GRPO.NoStepReason = noStepReason(tr, e.cfg.BatchSize)
	}
	if err := e.stopProc(prod, 90*time.Second); err != nil {
		return err
	}
	if err := e.drainArchiver(ctx, arch); err != nil {
		return err
	}
	_ = e.stopProc(tr, 10*time.Second)
	if err := e.grpoStats(ctx, ds, ckpt); err != nil {
		return err
	}
	return e.finishGPUTime(tl)
}

// trainerArgs are the GRPO tau2-trainer's arguments: every sampler in reload.endpoints, the
// layout's data-parallel settings, then trainer_args (which override both).
func (e *experiment) trainerArgs(ckpt string) []string {
	targs := []string{e.brokers, "backend=" + e.cfg.Backend, "model.path=" + e.rep.SFT.Checkpoint,
		"checkpoint.dir=" + ckpt, "data_dir=" + e.cfg.DataDir, fmt.Sprintf("max_steps=%d", e.cfg.GRPOSteps),
		fmt.Sprintf("batch_size=%d", e.cfg.BatchSize), fmt.Sprintf("group.group_size=%d", e.cfg.GroupSize),
		fmt.Sprintf("admission.tasks=[{domain: %s, split: %s, task_ids: %s}]", e.cfg.Domain, e.cfg.Split, yamlList(e.cfg.TaskIDs)),
		fmt.Sprintf("admission.sampling.max_tokens=%d", e.cfg.MaxNewToken),
		fmt.Sprintf("admission.sampling.temperature=%g", e.cfg.GRPOTemperature), fmt.Sprintf("admission.seed=%d", e.cfg.Seed),
		fmt.Sprintf("max_head_offpolicyness=%d", e.cfg.Offpolicyness), "actor.eps_clip=0.4", "actor.behav_imp_weight_cap=5", "actor.recompute_logprob=true",
		fmt.Sprintf("actor.optimizer.lr=%g", e.cfg.GRPOLR), fmt.Sprintf("actor.optimizer.warmup_steps=%d", e.cfg.GRPOWarmup),
		"reload.backend=sglang", "reload.endpoints=" + endpoints(e.policyAddrs)}
	return append(append(targs, e.layout.TrainerArgs...), e.cfg.TrainerArgs...)
}

// producerArgs are the GRPO tau2-producer's arguments: its calls spread over every sampler.
func (e *experiment) producerArgs() []string {
	return []string{e.brokers, "data_dir=" + e.cfg.DataDir, "econfig.domain=" + e.cfg.Domain,
		"policy.endpoints=" + endpoints(e.policyAddrs), "user_llm_base_url=http://" + e.llmAddr + "/v1",
		fmt.Sprintf("concurrency=%d", e.cfg.Concurrency), fmt.Sprintf("max_head_offpolicyness=%d", e.cfg.Offpolicyness)}
}

func (e *experiment) grpoStats(ctx context.Context, ds, ckpt string) error {
	g := &e.rep.GRPO
	g.Dataset, g.StepsLog = ds, filepath.Join(ckpt, steplog.FileName)
	recs, err := steplog.Read(ckpt)
	if errors.Is(err, fs.ErrNotExist) { // no step: the trainer writes the log with its first one
		recs, err, g.StepsLog = nil, nil, ""
	}
	if err != nil {
		return err
	}
	g.Steps = len(recs)
	for _, r := range recs {
		g.MeanAbsDiff = append(g.MeanAbsDiff, r.Metrics["behav_abs_diff"])
		g.CapFraction = append(g.CapFraction, r.Metrics["behav_cap_fraction"])
		g.TrainSeconds += r.Metrics["step_seconds"]
		g.TrainedEpisodes += int(r.Metrics["episodes"])
	}
	if dir, _, ok, _, err := (&checkpoint.Manager{Dir: ckpt, Keep: 3}).Latest(); err == nil && ok {
		g.FinalCkpt = dir
	}
	d, err := dataset.Open(ds)
	if err != nil {
		return err
	}
	by := map[int64][]float64{}
	var trajs []*schemas.Trajectory
	produced := 0
	// Infrastructure errors are produced episodes too (the accounting counts them); reward
	// statistics are of the graded ones.
	_, err = d.Scan(ctx, dataset.Filter{IncludeInfraErrors: true}, func(t *schemas.Trajectory) error {
		produced++
		if t.Status != schemas.StatusOK {
			return nil
		}
		trajs = append(trajs, t)
		by[t.PolicyVersionStart] = append(by[t.PolicyVersionStart], t.Reward)
		g.Episodes++
		g.GeneratedToken += float64(t.GeneratedTokens())
		return nil
	})
	if err != nil {
		return err
	}
	g.Accounting = report.Account(recs, produced)
	g.Diagnosis = report.Diagnose(trajs)
	var versions []int64
	for v := range by {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	for _, v := range versions {
		rs := by[v]
		var s, ss float64
		for _, r := range rs {
			s += r
		}
		mean := s / float64(len(rs))
		for _, r := range rs {
			ss += (r - mean) * (r - mean)
		}
		std := 0.0
		if len(rs) > 1 {
			std = math.Sqrt(ss / float64(len(rs)-1))
		}
		g.PerVersion = append(g.PerVersion, RewardStat{Version: v, Episodes: len(rs), Mean: mean, Std: std})
	}
	if g.Steps == 0 {
		e.printf("   GRPO took no step: %s", g.NoStepReason)
	}
	e.printf("   %d steps, %d episodes (%d trained on); mean reward per policy version:", g.Steps, g.Episodes, g.TrainedEpisodes)
	e.printf("   where the %d produced episodes went: %s", g.Accounting.Produced, accountingLine(g.Accounting))
	for _, r := range g.PerVersion {
		e.printf("     v%-3d %4d episodes  %.3f ± %.3f", r.Version, r.Episodes, r.Mean, r.Std)
	}
	return nil
}

// noStepReason says why the trainer has taken no step: its groups by outcome (from its metrics)
// and its last "waiting for groups" line, which names the setting for the common cases (every
// member of each group with the same reward; too few groups for batch_size).
func noStepReason(tr *proc.Proc, batch int) string {
	s := fmt.Sprintf("no batch of %d groups was ready", batch)
	if by, err := tr.ScrapeBy("tau2rl_trainer_groups_total", "outcome"); err == nil && len(by) > 0 {
		outcomes := make([]string, 0, len(by))
		for o, n := range by {
			outcomes = append(outcomes, fmt.Sprintf("%s %.0f", o, n))
		}
		sort.Strings(outcomes)
		s += "; the trainer's groups by outcome: " + strings.Join(outcomes, ", ")
	}
	if why := lastLineWith(tr.Tail(200), trainerWaiting); why != "" {
		s += "; its last word: " + why
	}
	return s
}

// figures draws the run's figures with tau2-eval plot, when the binary has that command.
func (e *experiment) figures(ctx context.Context) error {
	out := filepath.Join(e.dir, "figures")
	args := []string{"plot", "dataset=" + e.rep.GRPO.Dataset, "baseline=" + strconv.FormatFloat(e.rep.Demos.MeanReward, 'f', 4, 64), "out=" + out}
	if e.rep.GRPO.StepsLog != "" { // none when GRPO took no step: no mismatch figure then
		args = append(args, "steps="+e.rep.GRPO.StepsLog)
	}
	if g := e.rep.GRPO.GPUTime; g != nil {
		args = append(args, "timeline="+g.Timeline)
	}
	text, err := e.oneShot(ctx, "plot", "tau2-eval", args...)
	if err != nil {
		if strings.Contains(text, "unknown command") {
			e.printf("   tau2-eval has no plot command in this build: no figures")
			return nil
		}
		return err
	}
	files, _ := filepath.Glob(filepath.Join(out, "*"))
	e.rep.Figures = files
	e.printf("   %d figures in %s", len(files), out)
	return nil
}

func (e *experiment) writeReport() error {
	b, err := json.MarshalIndent(e.rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	r := &e.rep
	var s strings.Builder
	fmt.Fprintf(&s, "# tau2rl learning experiment (%s)\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&s, "policy=%s backend=%s domain=%s split=%s tasks=%s model=%s%s seed=%d offpolicyness=%d\n\n", e.cfg.Policy, e.cfg.Backend,
		e.cfg.Domain, e.cfg.Split, strings.Join(e.cfg.TaskIDs, ","), e.cfg.ModelConfig, e.cfg.ModelPath, e.cfg.Seed, e.cfg.Offpolicyness)
	fmt.Fprintf(&s, "| stage | result |\n|---|---|\n")
	fmt.Fprintf(&s, "| demonstrations (scripted, error rate %g) | %d episodes, success %.3f |\n", e.cfg.AgentErrorRate, r.Demos.Episodes, r.Demos.MeanReward)
	fmt.Fprintf(&s, "| SFT | %d steps, loss %.3f → %.3f |\n", r.SFT.Steps, r.SFT.FirstLoss, r.SFT.LastLoss)
	fmt.Fprintf(&s, "| eval before GRPO | avg %.3f, pass^k %s |\n", r.Before.Avg, rounded(r.Before.PassK))
	for _, p := range r.BeforeProbes {
		fmt.Fprintf(&s, "| eval before GRPO at temperature %g | avg %.3f, pass^k %s |\n", p.Temperature, p.Eval.Avg, rounded(p.Eval.PassK))
	}
	fmt.Fprintf(&s, "| GRPO | %d steps, %d episodes (%d trained on), train %.0fs of %.0fs |\n", r.GRPO.Steps, r.GRPO.Episodes, r.GRPO.TrainedEpisodes,
		r.GRPO.TrainSeconds, r.GRPO.WallSeconds)
	fmt.Fprintf(&s, "| eval after GRPO | avg %.3f, pass^k %s |\n", r.After.Avg, rounded(r.After.PassK))
	if r.BeforeHeldOut != nil && r.AfterHeldOut != nil {
		fmt.Fprintf(&s, "| held-out %s split (%d tasks never trained on), before → after GRPO | pass^1 %.3f → %.3f, pass^k %s → %s |\n",
			e.cfg.HeldOutSplit, len(e.cfg.HeldOutTaskIDs), r.BeforeHeldOut.Avg, r.AfterHeldOut.Avg, rounded(r.BeforeHeldOut.PassK), rounded(r.AfterHeldOut.PassK))
	}
	fmt.Fprintf(&s, "\n")
	if r.GRPO.NoStepReason != "" {
		fmt.Fprintf(&s, "**GRPO took no step** (the evaluation after is the SFT policy's again): %s\n\n", r.GRPO.NoStepReason)
	}
	fmt.Fprintf(&s, "Mean reward per policy version (episode start):\n\n| version | episodes | mean | std |\n|---|---|---|---|\n")
	for _, v := range r.GRPO.PerVersion {
		fmt.Fprintf(&s, "| v%d | %d | %.3f | %.3f |\n", v.Version, v.Episodes, v.Mean, v.Std)
	}
	writeAccounting(&s, r.GRPO.Accounting)
	writeDiagnosis(&s, r.GRPO.Diagnosis)
	writeGPUTime(&s, r.GRPO.GPUTime)
	writeSamplers(&s, r.GRPO.Samplers)
	fmt.Fprintf(&s, "\nTrain/inference log-prob mismatch per step (mean |behaviour − proximal|, fraction capped): %s %s\n", rounded(r.GRPO.MeanAbsDiff), rounded(r.GRPO.CapFraction))
	for _, f := range r.Figures {
		if rel, err := filepath.Rel(e.dir, f); err == nil && strings.HasSuffix(f, ".png") { // SVGs sit beside them
			fmt.Fprintf(&s, "\n![%s](%s)\n", strings.TrimSuffix(filepath.Base(f), ".png"), rel)
		}
	}
	if err := os.WriteFile(filepath.Join(e.dir, "report.md"), []byte(s.String()), 0o644); err != nil {
		return err
	}
	e.printf("report: %s (and report.json)", filepath.Join(e.dir, "report.md"))
	fmt.Fprint(e.out, "\n"+s.String())
	return nil
}

// rounded prints a list of measurements (pass^k, mismatch per step) to three significant digits,
// as the report's other numbers: [0.154 0.0412 0.00137], not 0.15384615384615385. report.json
// keeps the exact values.
func rounded(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'g', 3, 64)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
