package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// The small control topics (rollout requests, policy versions, infrastructure errors, dead letters)
// carry JSON: they are rare, tiny and read by operators with kcat, so readability wins over Arrow.
// Their Kafka framing uses ContentTypeJSON plus a MessageType header (see framing.go).

// SamplingParams are the decoding parameters a producer passes to the policy server.
type SamplingParams struct {
	// Temperature; 0 means greedy.
	Temperature float64 `json:"temperature" yaml:"temperature"`
	// TopP in (0,1]; 0 means the server default (1).
	TopP float64 `json:"top_p,omitempty" yaml:"top_p"`
	// TopK; 0 or -1 means disabled.
	TopK int `json:"top_k,omitempty" yaml:"top_k"`
	// MaxTokens caps the completion length of one call; 0 means the server default.
	MaxTokens int `json:"max_tokens,omitempty" yaml:"max_tokens"`
}

// RolloutRequest asks producers to run GroupSize episodes of one task (topic "rollout requests",
// key = TaskID). The trainer issues it under admission control.
type RolloutRequest struct {
	// RequestID is unique per request (UUID); trajectories echo it.
	RequestID string `json:"request_id"`
	TaskID    string `json:"task_id"`
	Domain    string `json:"domain"`
	Split     string `json:"split"`
	// GroupSize is the number of episodes (GRPO group size n), ≥ 1.
	GroupSize int `json:"group_size"`
	// PolicyVersion is the policy version current when the request was issued.
	PolicyVersion int64 `json:"policy_version"`
	// StaleAfterVersion, when set, tells producers to drop the request once the latest published
	// policy version exceeds it (bounded off-policyness). Nil means never stale.
	StaleAfterVersion *int64         `json:"stale_after_version,omitempty"`
	Sampling          SamplingParams `json:"sampling"`
	IssuedAt          time.Time      `json:"issued_at"`
}

// Validate checks a request before a producer acts on it.
func (r *RolloutRequest) Validate() error {
	switch {
	case r.RequestID == "":
		return fmt.Errorf("schemas: rollout request: empty request_id")
	case r.TaskID == "":
		return fmt.Errorf("schemas: rollout request %s: empty task_id", r.RequestID)
	case r.GroupSize < 1:
		return fmt.Errorf("schemas: rollout request %s: group_size %d < 1", r.RequestID, r.GroupSize)
	case r.Sampling.Temperature < 0 || r.Sampling.TopP < 0 || r.Sampling.TopP > 1 || r.Sampling.MaxTokens < 0:
		return fmt.Errorf("schemas: rollout request %s: bad sampling params %+v", r.RequestID, r.Sampling)
	}
	if err := ValidatePathComponent(r.Domain); err != nil {
		return fmt.Errorf("schemas: rollout request %s: domain: %w", r.RequestID, err)
	}
	if err := ValidatePathComponent(r.Split); err != nil {
		return fmt.Errorf("schemas: rollout request %s: split: %w", r.RequestID, err)
	}
	return nil
}

// PolicyVersion announces a new policy checkpoint (compacted topic "policy versions", key
// "policy"): producers reload servers and use it for staleness checks.
type PolicyVersion struct {
	Version int64 `json:"version"`
	// CheckpointPath is the directory of the HF-format safetensors checkpoint; empty when
	// InMemory.
	CheckpointPath string    `json:"checkpoint_path"`
	Time           time.Time `json:"time"`
	// InMemory: the servers took this version straight from the trainer's memory (CUDA IPC,
	// the trainer's reload.mode) after a step without a checkpoint (checkpoint.every > 1), so no
	// checkpoint holds it.
	InMemory bool `json:"in_memory,omitempty"`
}

// Validate checks a policy-version announcement.
func (p *PolicyVersion) Validate() error {
	if p.Version < 0 {
		return fmt.Errorf("schemas: policy version: negative version %d", p.Version)
	}
	if p.CheckpointPath == "" && !p.InMemory {
		return fmt.Errorf("schemas: policy version %d: empty checkpoint_path", p.Version)
	}
	return nil
}

// PolicyVersionKey is the Kafka key of every policy-version message (the topic is compacted).
const PolicyVersionKey = "policy"

// InfraError reports an infrastructure failure of an episode (topic "infrastructure errors", key =
// TaskID). It is never a reward.
type InfraError struct {
	TaskID       string `json:"task_id"`
	TrajectoryID string `json:"trajectory_id"`
	RequestID    string `json:"request_id,omitempty"`
	Domain       string `json:"domain,omitempty"`
	// Stage names where it failed (policy_llm, user_llm, judge_llm, environment, evaluator, publish, …).
	Stage string    `json:"stage"`
	Error string    `json:"error"`
	Time  time.Time `json:"time"`
	// Partial is the episode so far (Status infra_error), for debugging; may be nil.
	Partial *Trajectory `json:"partial,omitempty"`
}

// Validate checks an infrastructure-error report.
func (e *InfraError) Validate() error {
	if e.TaskID == "" || e.Stage == "" || e.Error == "" {
		return fmt.Errorf("schemas: infra error: task_id, stage and error are required (got %q, %q, %q)", e.TaskID, e.Stage, e.Error)
	}
	return nil
}

// DeadLetter wraps a message a consumer could not process (topic "dead letters", key = the
// original key). Key and Value are the raw bytes (base64 in JSON).
type DeadLetter struct {
	Topic     string            `json:"topic"`
	Partition int               `json:"partition"`
	Offset    int64             `json:"offset"`
	Key       []byte            `json:"key"`
	Value     []byte            `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
	// Consumer names the consumer group or role that gave up on the message.
	Consumer string    `json:"consumer"`
	Error    string    `json:"error"`
	Time     time.Time `json:"time"`
}

// Validate checks a dead-letter record.
func (d *DeadLetter) Validate() error {
	if d.Topic == "" || d.Error == "" {
		return fmt.Errorf("schemas: dead letter: topic and error are required (got %q, %q)", d.Topic, d.Error)
	}
	return nil
}

// validator is implemented by every control message.
type validator interface{ Validate() error }

// MarshalControl encodes a control message as JSON after validating it.
func MarshalControl(v validator) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("schemas: marshal %T: %w", v, err)
	}
	return b, nil
}

// UnmarshalControl decodes a JSON control message strictly (unknown fields are allowed for forward
// compatibility, trailing data is not) and validates it.
func UnmarshalControl(data []byte, v validator) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("schemas: unmarshal %T: %w", v, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("schemas: unmarshal %T: trailing data after the JSON value", v)
	}
	return v.Validate()
}

// TooStale is the pipeline's one staleness rule, AReaL's max_head_offpolicyness: work that
// policy version from produced (a request issued at from, a trajectory whose oldest token came
// from from) is too stale for a consumer whose latest policy version is latest when
// latest − from > maxOff. The trainer's admission stamps requests with StaleAfter, producers drop
// requests by it (producers/rollout.Stale), and the trainer's grouper drops trajectories by it
// (trainer/group.IsStale); docs/ARCHITECTURE.md, "Staleness".
func TooStale(from, latest, maxOff int64) bool { return latest-from > maxOff }

// StaleAfter is the last latest version at which work from version from is still fresh under
// TooStale: the value of RolloutRequest.StaleAfterVersion.
func StaleAfter(from, maxOff int64) int64 { return from + maxOff }
