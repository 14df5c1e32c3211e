package schemas

import (
	"fmt"
)

// Kafka framing, transport-agnostic: callers copy Framed.Headers into their client's header type.
// Every tau2rl message carries HeaderContentType, HeaderSchemaVersion and HeaderMessageType; the
// key is the task id for trajectories, rollout requests and infra errors, PolicyVersionKey for
// policy versions, and the original key for dead letters.
const (
	// HeaderSchemaVersion carries SchemaVersion ("1.0").
	HeaderSchemaVersion = "tau2rl-schema-version"
	// HeaderContentType carries the payload encoding.
	HeaderContentType = "content-type"
	// HeaderMessageType says which contract type the payload holds (MessageType* values).
	HeaderMessageType = "tau2rl-message-type"
)

// Content types.
const (
	// ContentTypeArrowStream is an uncompressed Arrow IPC stream (one schema message, one record
	// batch); compression, if any, is left to the transport.
	ContentTypeArrowStream = "application/vnd.apache.arrow.stream"
	// ContentTypeJSON is a single JSON object.
	ContentTypeJSON = "application/json"
)

// Message types (HeaderMessageType values).
const (
	MessageTypeTrajectories   = "trajectories"
	MessageTypeRolloutRequest = "rollout_request"
	MessageTypePolicyVersion  = "policy_version"
	MessageTypeInfraError     = "infra_error"
	MessageTypeDeadLetter     = "dead_letter"
)

// Framed is one Kafka message ready for any client: key, value and headers.
type Framed struct {
	Key     string
	Value   []byte
	Headers map[string]string
}

// FrameTrajectories validates and encodes trajectories of one task into a message keyed by the
// task id, so a GRPO group lands in one partition. Trajectories of different tasks must be framed
// separately.
func FrameTrajectories(trajs ...*Trajectory) (Framed, error) {
	if len(trajs) == 0 {
		return Framed{}, fmt.Errorf("schemas: frame: no trajectories")
	}
	key := trajs[0].TaskID
	for i, t := range trajs {
		if t == nil {
			return Framed{}, fmt.Errorf("schemas: frame: trajectory %d is nil", i)
		}
		if err := t.Validate(); err != nil {
			return Framed{}, fmt.Errorf("schemas: frame: %w", err)
		}
		if t.TaskID != key {
			return Framed{}, fmt.Errorf("schemas: frame: trajectory %s has task %q, batch key is %q", t.ID, t.TaskID, key)
		}
	}
	value, err := EncodeBatch(trajs)
	if err != nil {
		return Framed{}, fmt.Errorf("schemas: frame: %w", err)
	}
	return Framed{Key: key, Value: value, Headers: Headers(ContentTypeArrowStream, MessageTypeTrajectories)}, nil
}

// Headers returns the standard header set for a payload.
func Headers(contentType, messageType string) map[string]string {
	return map[string]string{
		HeaderContentType:   contentType,
		HeaderSchemaVersion: SchemaVersion,
		HeaderMessageType:   messageType,
	}
}

// checkHeaders verifies content type, message type and version headers.
func checkHeaders(headers map[string]string, contentType, messageType string) error {
	if got, ok := headers[HeaderContentType]; !ok || got != contentType {
		return fmt.Errorf("schemas: unframe %s: %w: content type %q, want %q", messageType, ErrFraming, got, contentType)
	}
	// Older producers may omit the message type; when present it must match.
	if got, ok := headers[HeaderMessageType]; ok && got != messageType {
		return fmt.Errorf("schemas: unframe %s: %w: message type %q", messageType, ErrFraming, got)
	}
	if _, err := CheckVersion(headers[HeaderSchemaVersion], "kafka header "+HeaderSchemaVersion); err != nil {
		return err
	}
	return nil
}

// UnframeTrajectories checks the headers (content type, message type, schema version) and decodes
// and validates the trajectories. Any error means the message belongs in dead letters;
// errors.Is(err, ErrUnsupportedVersion) tells version problems apart.
func UnframeTrajectories(value []byte, headers map[string]string) ([]*Trajectory, error) {
	if err := checkHeaders(headers, ContentTypeArrowStream, MessageTypeTrajectories); err != nil {
		return nil, err
	}
	trajs, err := DecodeBatch(value)
	if err != nil {
		return nil, fmt.Errorf("schemas: unframe trajectories: %w", err)
	}
	for _, t := range trajs {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("schemas: unframe trajectories: %w", err)
		}
	}
	return trajs, nil
}

// FrameControl encodes a control message (RolloutRequest, PolicyVersion, InfraError, DeadLetter)
// as JSON with its headers and key.
func FrameControl(v validator) (Framed, error) {
	mt, key, err := controlMeta(v)
	if err != nil {
		return Framed{}, err
	}
	b, err := MarshalControl(v)
	if err != nil {
		return Framed{}, fmt.Errorf("schemas: frame %s: %w", mt, err)
	}
	return Framed{Key: key, Value: b, Headers: Headers(ContentTypeJSON, mt)}, nil
}

// UnframeControl checks the headers for v's message type and decodes and validates the JSON into
// v (a pointer to one of the control types).
func UnframeControl(value []byte, headers map[string]string, v validator) error {
	mt, _, err := controlMeta(v)
	if err != nil {
		return err
	}
	if err := checkHeaders(headers, ContentTypeJSON, mt); err != nil {
		return err
	}
	return UnmarshalControl(value, v)
}

func controlMeta(v validator) (messageType, key string, err error) {
	switch m := v.(type) {
	case *RolloutRequest:
		return MessageTypeRolloutRequest, m.TaskID, nil
	case *PolicyVersion:
		return MessageTypePolicyVersion, PolicyVersionKey, nil
	case *InfraError:
		return MessageTypeInfraError, m.TaskID, nil
	case *DeadLetter:
		return MessageTypeDeadLetter, string(m.Key), nil
	}
	return "", "", fmt.Errorf("schemas: %T is not a control message type", v)
}
