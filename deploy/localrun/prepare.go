package localrun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tau2rl/lib/inference/tokenizer"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/episode"
)

// Config is tau2-run's configuration (its keys are the command's): the pipeline on one machine.
type Config struct {
	// Bin is the directory holding the built binaries.
	Bin string `yaml:"bin"`
	// Dir is where each run gets a timestamped directory of logs, Kafka data,
	// the Parquet dataset and the trainer's checkpoints.
	Dir string `yaml:"dir"`
	// Domain and Split choose the τ² tasks the trainer requests rollouts for.
	// banking_knowledge has no splits: any split name is all its tasks.
	Domain string `yaml:"domain"`
	Split  string `yaml:"split"`
	// RetrievalConfig is banking_knowledge's retrieval configuration (τ²'s
	// --retrieval-config; the producer's econfig.retrieval_config): "" = the
	// domain's default, bm25. Other domains ignore it. docs/TAU2.md §11.
	RetrievalConfig string `yaml:"retrieval_config"`
	// Steps is how many trainer steps to run before stopping.
	Steps int `yaml:"steps"`
	// GroupSize is the number of rollouts per task (GRPO group), BatchSize the
	// number of groups per trainer step.
	GroupSize int `yaml:"group_size"`
	BatchSize int `yaml:"batch_size"`
	// Concurrency is how many episodes the producer runs at once.
	Concurrency int `yaml:"concurrency"`
	// AgentErrorRate is how often the scripted policy deviates from the gold
	// actions, so that rewards vary within a group.
	AgentErrorRate float64 `yaml:"agent_error_rate"`
	// DataDir is the τ² data directory ("" = resolved by lib/assets: TAU2_DATA_DIR,
	// ../shared/tau2-data, the cache, a download; docs/ASSETS.md), passed to every role.
	DataDir string `yaml:"data_dir"`
	// ModelConfig is the Hugging Face config.json of the model the trainer
	// starts from (random weights): tiny, but with Qwen3's real vocabulary.
	ModelConfig string `yaml:"model_config"`
	// Timeout bounds the whole run.
	Timeout time.Duration `yaml:"timeout"`
	// Interval is how often progress is printed.
	Interval time.Duration `yaml:"interval"`
}

// DefaultConfig returns the documented defaults (make run: airline, 2 trainer steps).
func DefaultConfig() Config {
	return Config{
		Bin: "bin", Dir: "run", Domain: "airline", Split: "train", Steps: 2,
		GroupSize: 4, BatchSize: 2, Concurrency: 32, AgentErrorRate: 0.3,
		ModelConfig: "deploy/models/qwen3-tiny/config.json",
		Timeout:     15 * time.Minute, Interval: 2 * time.Second,
	}
}

// Validate checks the configuration (cli calls it before anything starts: exit status 2).
func (c *Config) Validate() error {
	var errs []error
	if c.Steps < 1 || c.GroupSize < 1 || c.BatchSize < 1 || c.Concurrency < 1 {
		errs = append(errs, errors.New("steps, group_size, batch_size and concurrency must be at least 1"))
	}
	if c.AgentErrorRate < 0 || c.AgentErrorRate > 1 {
		errs = append(errs, fmt.Errorf("agent_error_rate: %v must be in [0, 1]", c.AgentErrorRate))
	}
	if c.Timeout <= 0 || c.Interval <= 0 {
		errs = append(errs, errors.New("timeout and interval must be positive"))
	}
	if c.Bin == "" || c.Dir == "" || c.Domain == "" {
		errs = append(errs, errors.New("bin, dir and domain are required"))
	}
	return errors.Join(errs...)
}

// PrepareExperiment resolves, before any process starts, what every process of the pipeline is handed:
// the binaries are built, the τ² data directory (lib/assets' order) has the domain's tasks, the
// Qwen3 tokenizer is found — on a fresh clone downloaded, in the foreground with its progress
// bar — and exported to the processes ($QWEN3_TOKENIZER_DIR), and model_config is absolute. An
// unknown domain wraps ErrUsage.
func (c *Config) Prepare() error {
	if err := checkBinaries(c.Bin, []string{"tau2-broker", "tau2-scripted-llm", "tau2-archiver", "tau2-trainer", "tau2-producer"}, "run 'make build'"); err != nil {
		return err
	}
	dataDir, err := data.Dir(c.DataDir)
	if err != nil {
		return fmt.Errorf("τ² data: %w", err)
	}
	c.DataDir = dataDir
	if err := CheckDomain(dataDir, c.Domain); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if err := CheckRetrieval(dataDir, c.Domain, c.RetrievalConfig); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	tokDir, err := tokenizer.LocateQwen3()
	if err != nil {
		return fmt.Errorf("Qwen3 tokenizer: %w", err)
	}
	if err := os.Setenv(tokenizer.EnvDir, tokDir); err != nil {
		return err
	}
	if c.ModelConfig, err = filepath.Abs(c.ModelConfig); err != nil {
		return err
	}
	return nil
}

// PrepareExperiment resolves, before any process starts, what every stage shares: the binaries are built
// (tau2-sampler too with policy=sampler), the τ² data directory, the one task list of every
// stage (SelectTasks, reporting to out the tasks it leaves out and why), and absolute paths for
// bin, model_config and model_path. A task selection that leaves nothing wraps ErrUsage.
func PrepareExperiment(c *ExperimentConfig, out io.Writer) error {
	bins := []string{"tau2-broker", "tau2-scripted-llm", "tau2-archiver", "tau2-trainer", "tau2-producer", "tau2-eval"}
	if c.Policy == "sampler" {
		bins = append(bins, "tau2-sampler")
	}
	if err := checkBinaries(c.Bin, bins, "make build; for policy=sampler backend=cuda: make learn"); err != nil {
		return err
	}
	dataDir, err := data.Dir(c.DataDir)
	if err != nil {
		return fmt.Errorf("τ² data: %w", err)
	}
	c.DataDir = dataDir
	if c.TaskIDs, err = SelectTasks(*c, out); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if c.HeldOutTaskIDs, err = SelectHeldOut(*c, out); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	for _, p := range []*string{&c.ModelConfig, &c.ModelPath, &c.Bin} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	return nil
}

// SelectHeldOut resolves heldout_split's tasks by SelectTasks' rules (restricted to
// heldout_task_ids when given, every one of them rather than the first 'tasks'); none without a
// held-out split. The split the policy trains on is refused: it would measure nothing held out.
func SelectHeldOut(c ExperimentConfig, out io.Writer) ([]string, error) {
	if c.HeldOutSplit == "" {
		return nil, nil
	}
	if c.HeldOutSplit == c.Split {
		return nil, fmt.Errorf("heldout_split %q is the split the policy trains on (airline's other split is test)", c.Split)
	}
	h := c
	h.Split, h.TaskIDs, h.Tasks = c.HeldOutSplit, c.HeldOutTaskIDs, 0
	fmt.Fprintf(out, "held-out split %s:\n", c.HeldOutSplit)
	ids, err := SelectTasks(h, out)
	if err != nil {
		return nil, fmt.Errorf("heldout_split: %w", err)
	}
	return ids, nil
}

// checkBinaries reports the first of names not built in bin, with how to build it.
func checkBinaries(bin string, names []string, how string) error {
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%s not built in %s (%s): %w", b, bin, how, err)
		}
	}
	return nil
}

// CheckDomain reports a domain the τ² data has no tasks for, naming the domains tau2rl knows
// (env's registry), before any process starts (the scripted server would otherwise fail during
// start-up with a file error).
func CheckDomain(dataDir, domain string) error {
	tasks, err := data.TasksPath(dataDir, domain, data.Head)
	if err != nil {
		return err
	}
	if _, err := os.Stat(tasks); err == nil {
		return nil
	}
	return fmt.Errorf("domain %q: the τ² data in %s has no tasks for it (domains: %s)", domain, dataDir, strings.Join(env.Domains(), ", "))
}

// CheckRetrieval reports, before any process starts, a retrieval_config the domain's environment
// refuses (episode.CheckRetrieval: the producer's own start-up check, run here before any process
// starts).
func CheckRetrieval(dataDir, domain, retrieval string) error {
	return episode.CheckRetrieval(dataDir, domain, retrieval)
}
