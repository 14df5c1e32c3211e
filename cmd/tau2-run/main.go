// Command tau2-run runs the whole tau2rl pipeline on one machine, for `make run`
// and for a first look: the embedded Kafka broker (tau2-broker), the scripted
// OpenAI-compatible LLM server (tau2-scripted-llm, standing in for SGLang and the
// user simulator), the archiver, the trainer and the producer, each as its own
// process exactly as they run in production. It prints progress while they work
// and a summary at the end, then stops them with SIGTERM, as systemd would.
//
// It is a development tool: production runs each binary under systemd against a
// real Kafka cluster (see deploy/ and docs/OPERATIONS.md).
package main

import (
	"context"
	"errors"
	"os"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/deploy/localrun"
)

const usage = `tau2-run — run the whole tau2rl pipeline locally (what 'make run' does)

Starts tau2-broker (embedded Kafka on loopback), tau2-scripted-llm (a scripted
OpenAI-compatible server that plays the policy from each task's gold actions with
errors, and the user from the task's scenario), tau2-archiver, tau2-trainer and
tau2-producer, shows progress until the trainer has taken 'steps' steps, stops
everything gracefully, and prints a summary of what was produced, archived and
trained. Logs and data go to 'dir' (one sub-directory per run).

Examples:
  tau2-run                          # airline, 2 trainer steps
  tau2-run domain=retail steps=5
  tau2-run bin=bin dir=/tmp/tau2run

The learning experiment (demonstrations → SFT → GRPO → pass^k before/after → figures):
  tau2-run experiment --help`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "experiment" {
		experimentMain(os.Args[2:])
		return
	}
	cfg := defaultConfig()
	cli.Main(cli.App{Name: "tau2-run", Usage: usage, MetricsAddr: "off"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		if err := cfg.Prepare(); err != nil {
			return prepareUsage(err)
		}
		dir, err := localrun.NewRunDir(cfg.Dir, time.Now())
		if err != nil {
			return err
		}
		rt.Ready()
		return localrun.RunPipeline(ctx, cfg.Config, dir, os.Stdout)
	})
}

// config is tau2-run's configuration: localrun.Config's keys.
type config struct {
	localrun.Config `yaml:",inline"`
}

func defaultConfig() config { return config{localrun.DefaultConfig()} }

// prepareUsage makes localrun's configuration errors (an unknown domain, no task to run) exit status 2.
func prepareUsage(err error) error {
	if errors.Is(err, localrun.ErrUsage) {
		return cli.Usage(err)
	}
	return err
}
