package rollout

import (
	"context"
	"fmt"
	"sync"
	"time"

	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/lib/uuid"
	"tau2rl/schemas"
	"tau2rl/tau2/data"
	"tau2rl/tau2/episode"
)

// SelfDrivenConfig makes the producer issue its own rollout requests instead of reading them from
// Kafka: one request of Trials episodes for each task of a split, then exit once they are
// published. It is how a producer runs without a trainer: a local smoke run, an evaluation
// sweep, or a demonstration dataset for SFT (the archiver keeps what it publishes).
type SelfDrivenConfig struct {
	// Enabled turns the mode on. Default false (requests come from the rollout-requests topic).
	Enabled bool `yaml:"enabled"`
	// Domain is the τ² domain; empty uses econfig.domain.
	Domain string `yaml:"domain"`
	// Split is the task split (τ²'s split_tasks.json: train, test, base). Default "train".
	Split string `yaml:"split"`
	// TaskIDs restricts the run to these tasks of the split (empty = all), in this order.
	TaskIDs []string `yaml:"task_ids"`
	// Limit runs only the first Limit tasks (0 = all).
	Limit int `yaml:"limit"`
	// Trials is the number of episodes per task (one request, one group). Default 4.
	Trials int `yaml:"trials"`
	// Sampling are the policy's sampling parameters. Default temperature 1, top_p 1, max_tokens 0
	// (policy.max_new_tokens).
	Sampling schemas.SamplingParams `yaml:"sampling"`
}

// DefaultSelfDrivenConfig returns the defaults documented on SelfDrivenConfig.
func DefaultSelfDrivenConfig() SelfDrivenConfig {
	return SelfDrivenConfig{Split: "train", Trials: 4, Sampling: schemas.SamplingParams{Temperature: 1, TopP: 1}}
}

// Validate reports configuration errors.
func (c *SelfDrivenConfig) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case c.Trials < 1:
		return fmt.Errorf("self_driven.trials: %d must be ≥ 1", c.Trials)
	case c.Limit < 0:
		return fmt.Errorf("self_driven.limit: %d must be ≥ 0", c.Limit)
	case c.Sampling.Temperature < 0 || c.Sampling.TopP < 0 || c.Sampling.TopP > 1 || c.Sampling.MaxTokens < 0:
		return fmt.Errorf("self_driven.sampling: bad values %+v", c.Sampling)
	}
	if err := schemas.ValidatePathComponent(c.Split); err != nil {
		return fmt.Errorf("self_driven.split: %w", err)
	}
	if c.Domain != "" {
		if err := schemas.ValidatePathComponent(c.Domain); err != nil {
			return fmt.Errorf("self_driven.domain: %w", err)
		}
	}
	return nil
}

// RequestList is a finite Source of rollout requests made in-process (self-driven mode). Its
// messages look like the rollout-requests topic's (framed JSON with headers), so the service
// handles them exactly as it handles Kafka's; commits are no-ops.
type RequestList struct {
	mu   sync.Mutex
	msgs []tkafka.Message
	next int
}

// NewRequestList makes one request per task of cfg's split (domain: cfg.Domain or the default),
// each of cfg.Trials episodes, labelled with the policy version version.
func NewRequestList(cfg SelfDrivenConfig, defaultDomain string, tasks func(domain, split string) (*episode.TaskSet, error), version int64) (*RequestList, error) {
	domain := cfg.Domain
	if domain == "" {
		domain = defaultDomain
	}
	set, err := tasks(domain, cfg.Split)
	if err != nil {
		return nil, fmt.Errorf("rollout: self-driven tasks: %w", err)
	}
	sel := set.Tasks
	if len(cfg.TaskIDs) > 0 {
		if sel, err = data.SelectIDs(sel, func(t *data.Task) string { return t.ID }, cfg.TaskIDs); err != nil {
			return nil, fmt.Errorf("rollout: self_driven.task_ids: %s split %q %w", domain, cfg.Split, err)
		}
	}
	ids := make([]string, len(sel))
	for i, t := range sel {
		ids[i] = t.ID
	}
	if cfg.Limit > 0 && len(ids) > cfg.Limit {
		ids = ids[:cfg.Limit]
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("rollout: self-driven: %s split %q has no tasks", domain, cfg.Split)
	}
	l := &RequestList{}
	now := time.Now().UTC()
	for i, id := range ids {
		req := schemas.RolloutRequest{RequestID: uuid.New(), TaskID: id, Domain: domain, Split: cfg.Split, GroupSize: cfg.Trials,
			PolicyVersion: version, Sampling: cfg.Sampling, IssuedAt: now}
		f, err := schemas.FrameControl(&req)
		if err != nil {
			return nil, fmt.Errorf("rollout: self-driven request for task %s: %w", id, err)
		}
		msg := tkafka.Message{Topic: "self-driven", Partition: 0, Offset: int64(i), Key: []byte(f.Key), Value: f.Value}
		for k, v := range f.Headers {
			msg.Headers = append(msg.Headers, tkafka.Header{Key: k, Value: []byte(v)})
		}
		l.msgs = append(l.msgs, msg)
	}
	return l, nil
}

// Len is the number of requests; Episodes the episodes they ask for.
func (l *RequestList) Len() int { return len(l.msgs) }

// Fetch hands out the next request, or ErrRequestsDone.
func (l *RequestList) Fetch(ctx context.Context) (tkafka.Message, error) {
	if err := ctx.Err(); err != nil {
		return tkafka.Message{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next >= len(l.msgs) {
		return tkafka.Message{}, ErrRequestsDone
	}
	l.next++
	return l.msgs[l.next-1], nil
}

// Commit does nothing: an in-process request is never redelivered.
func (l *RequestList) Commit(context.Context, ...tkafka.Message) error { return nil }
