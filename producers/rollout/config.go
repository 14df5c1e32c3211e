package rollout

import (
	"errors"
	"fmt"
	"time"

	"tau2rl/producers/shaping"
	"tau2rl/tau2/episode"
)

// Config is the rollout service's configuration (tau2-producer in mode
// tau2).
type Config struct {
	episode.RunnerConfig `yaml:",inline"`
	// ConsumerGroup shares rollout requests between producers. Default
	// "producers".
	ConsumerGroup string `yaml:"consumer_group"`
	// MaxConcurrentEpisodes bounds the episodes running in this process
	// (a request's whole group is admitted at once). Default 1024.
	MaxConcurrentEpisodes int `yaml:"concurrency"`
	// MaxHeadOffpolicyness drops requests issued more than this many
	// policy versions before the latest known one (AReaL's
	// max_head_offpolicyness); requests also carry stale_after_version.
	// -1 disables the check. Default 2.
	MaxHeadOffpolicyness int64 `yaml:"max_head_offpolicyness"`
	// ShutdownGrace is how long in-flight episodes may run after SIGTERM;
	// groups not finished by then are handed back (not committed, so
	// redelivered). Default 60s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Episodes stops taking requests once this many episodes have been
	// started, finishes them and exits; 0 runs until stopped. Default 0.
	Episodes int `yaml:"episodes"`
	// PublishInfraTrajectories also publishes infrastructure failures as
	// trajectories with status infra_error on the trajectories topic (the
	// trainer closes their admission slot, the archiver keeps them; no
	// reward is read from them). They always go to the infra-errors topic.
	// Default true.
	PublishInfraTrajectories bool `yaml:"publish_infra_trajectories"`
	// Tags are added to every trajectory.
	Tags map[string]string `yaml:"tags"`
	// SelfDriven makes the producer issue its own requests (a task list × trials) and exit when
	// they are done, instead of reading the rollout-requests topic.
	SelfDriven SelfDrivenConfig `yaml:"self_driven"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		RunnerConfig:             episode.DefaultRunnerConfig(),
		ConsumerGroup:            "producers",
		MaxConcurrentEpisodes:    1024,
		MaxHeadOffpolicyness:     2,
		ShutdownGrace:            60 * time.Second,
		PublishInfraTrajectories: true,
		SelfDriven:               DefaultSelfDrivenConfig(),
	}
}

// Validate reports configuration errors.
func (c *Config) Validate() error {
	var errs []error
	if err := c.RunnerConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := (shaping.Config{TurnDiscount: c.Econfig.TurnDiscount, InvalidFormatPenalty: c.Econfig.InvalidFormatPenalty}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Policy.Mode != episode.ModeToken {
		errs = append(errs, errors.New("policy.mode: the producer needs token mode (chat mode records no tokens; use tau2-eval run)"))
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("consumer_group: required"))
	}
	if c.MaxConcurrentEpisodes < 1 {
		errs = append(errs, fmt.Errorf("concurrency: %d must be ≥ 1", c.MaxConcurrentEpisodes))
	}
	if c.MaxHeadOffpolicyness < -1 {
		errs = append(errs, fmt.Errorf("max_head_offpolicyness: %d must be ≥ -1", c.MaxHeadOffpolicyness))
	}
	if c.ShutdownGrace < 0 || c.Episodes < 0 {
		errs = append(errs, errors.New("shutdown_grace and episodes must be ≥ 0"))
	}
	if err := c.SelfDriven.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("producer config: %w", errors.Join(errs...))
	}
	return nil
}
