// Package feed is the step feed of a trainer that spans several hosts (docs/MULTIGPU.md,
// "Several hosts"): host 0 (the leader) runs the normal trainer — Kafka reader, grouping,
// admission, checkpoints, offsets — and sends every other host (a follower) what its local
// data-parallel ranks need to take part in each optimizer update: the step's prefix-tree packing
// and loss sequences with the actor settings, where to write its optimizer shards at a
// checkpoint, and where to restore them from at a resume. The collectives inside the update
// (NCCL, or the in-process comm in tests) keep the hosts in lockstep; the feed only carries the
// inputs and the acknowledgements, so a follower that fails or disconnects fails the leader's
// step with an error naming the host rather than leaving it waiting.
//
// One TCP connection per follower, opened by the follower (retrying until the leader listens),
// guarded by the job name like gpu/collective's rendezvous. Every message is a frame:
//
//	"T2FD" | uint32 big-endian payload length | payload (encoding/gob of Message)
//
// Frames come from the network, so Read bounds the length before allocating and Validate checks
// every field a follower relies on (micro-batch structure, settings) before it is used.
package feed

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"

	"tau2rl/gpu"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// Proto names the protocol version in the hello; a leader refuses any other.
const Proto = "tau2rl-feed/1"

// Kind says what a message is.
type Kind uint8

const (
	// Hello: follower → leader, first message: Proto, Job, Host.
	Hello Kind = iota + 1
	// Welcome: leader → follower, the reply to Hello: Dir is the checkpoint the job resumes from
	// ("" for a fresh start: the follower's own model settings), CommID the collective's unique id
	// (NCCL) when the backend needs one.
	Welcome
	// Step: leader → follower: run the update of Step; answered by an Ack with the local ranks'
	// loss statistics.
	Step
	// Checkpoint: leader → follower: write the local ranks' optimizer shards into Dir; Ack.
	Checkpoint
	// Restore: leader → follower: load the optimizer state of checkpoint Dir (a collective: every
	// host loads together); Ack.
	Restore
	// Ack: follower → leader: Seq done; Err is the follower's error ("" when it succeeded).
	Ack
	// Refused: leader → follower instead of Welcome: Err says why (wrong job, bad host number, a
	// host already connected).
	Refused
	// Bye: leader → follower: the leader shuts down cleanly; the follower exits with success. A
	// connection that ends without it is the leader's failure, and the follower's too.
	Bye
)

func (k Kind) String() string {
	switch k {
	case Hello:
		return "hello"
	case Welcome:
		return "welcome"
	case Step:
		return "step"
	case Checkpoint:
		return "checkpoint"
	case Restore:
		return "restore"
	case Ack:
		return "ack"
	case Refused:
		return "refused"
	case Bye:
		return "bye"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Actor is the part of the trainer's actor settings an update uses. The leader sends its own
// with every step, so a follower cannot train with a different learning rate or clip by
// mistake.
type Actor struct {
	Optimizer        gpu.Optimizer
	Loss             loss.Config
	PPONMinibatches  int
	RecomputeLogprob bool
}

// StepData is one optimizer update's inputs (trainer/step's updateParallel).
type StepData struct {
	Actor   Actor
	Packing *prefixtree.Packing
	Seqs    []loss.Seq
}

// Message is one frame's content; which fields are set depends on Kind.
type Message struct {
	Kind  Kind
	Seq   uint64 // the leader's request number; an Ack repeats it
	Proto string // Hello
	Job   string // Hello
	Host  int    // Hello: the follower's host rank
	// Settings: Hello: the follower's Options.Settings, which must be the leader's.
	Settings string
	Dir      string // Welcome, Checkpoint, Restore
	CommID   []byte // Welcome
	Step     *StepData
	Stats    loss.Stats // Ack of a Step: the follower's local ranks' statistics
	Err      string     // Ack, Refused
}

var magic = [4]byte{'T', '2', 'F', 'D'}

// DefaultMaxFrame bounds a frame's payload: a step of 16k tokens per GPU on 8 hosts × 8 GPUs is
// about 100 MB of packed micro-batches; 1 GiB leaves room and still refuses garbage lengths.
const DefaultMaxFrame = 1 << 30

// Write encodes m as one frame.
func Write(w io.Writer, m *Message) error {
	var buf bytes.Buffer
	buf.Write(magic[:])
	buf.Write([]byte{0, 0, 0, 0})
	if err := gob.NewEncoder(&buf).Encode(m); err != nil {
		return fmt.Errorf("feed: encode %s: %w", m.Kind, err)
	}
	b := buf.Bytes()
	n := len(b) - 8
	if uint64(n) > 1<<32-1 {
		return fmt.Errorf("feed: %s message of %d bytes is too large", m.Kind, n)
	}
	binary.BigEndian.PutUint32(b[4:8], uint32(n))
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("feed: send %s: %w", m.Kind, err)
	}
	return nil
}

// ErrFrame marks a malformed frame (bad magic, length over the bound, undecodable or invalid
// content), as opposed to a connection error.
var ErrFrame = errors.New("feed: malformed frame")

// Read decodes one frame of at most maxFrame payload bytes (DefaultMaxFrame when ≤ 0) and
// validates it. io.EOF means the peer closed the connection between frames.
func Read(r io.Reader, maxFrame int) (*Message, error) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("feed: connection closed inside a frame header: %w", err)
		}
		return nil, err
	}
	if [4]byte(hdr[:4]) != magic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrFrame, hdr[:4], magic[:])
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if uint64(n) > uint64(maxFrame) {
		return nil, fmt.Errorf("%w: payload of %d bytes over the bound %d", ErrFrame, n, maxFrame)
	}
	// Read in bounded chunks so a lying length on a short stream costs no more than it delivers.
	var payload bytes.Buffer
	if _, err := io.CopyN(&payload, r, int64(n)); err != nil {
		return nil, fmt.Errorf("feed: connection closed inside a %d-byte frame: %w", n, err)
	}
	m := new(Message)
	if err := gob.NewDecoder(&payload).Decode(m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	if payload.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the message", ErrFrame, payload.Len())
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	return m, nil
}

// Validate checks the fields of m's kind: what a follower or the leader relies on before acting.
func (m *Message) Validate() error {
	switch m.Kind {
	case Hello:
		if m.Host < 1 {
			return fmt.Errorf("hello from host %d: followers are hosts ≥ 1", m.Host)
		}
	case Welcome, Ack, Refused, Bye:
	case Checkpoint, Restore:
		if m.Dir == "" {
			return fmt.Errorf("%s without a directory", m.Kind)
		}
	case Step:
		if m.Step == nil {
			return errors.New("step without data")
		}
		return m.Step.Validate()
	default:
		return fmt.Errorf("unknown message kind %d", uint8(m.Kind))
	}
	return nil
}

// Validate checks the actor settings and every micro-batch's structure (prefixtree's contract,
// the backend's vocabulary is checked by the backend) and that every loss reference names a
// sequence of Seqs (trainer/loss checks the token offsets when it reads them).
func (s *StepData) Validate() error {
	a := s.Actor
	if a.PPONMinibatches < 1 {
		return fmt.Errorf("step: ppo_n_minibatches %d", a.PPONMinibatches)
	}
	if err := a.Optimizer.Validate(); err != nil {
		return fmt.Errorf("step: %w", err)
	}
	if err := a.Loss.Validate(); err != nil {
		return fmt.Errorf("step: %w", err)
	}
	if s.Packing == nil || len(s.Packing.MicroBatches) == 0 {
		return errors.New("step: no micro-batches")
	}
	for i, mb := range s.Packing.MicroBatches {
		if mb == nil || mb.Len() == 0 {
			return fmt.Errorf("step: micro-batch %d is empty", i)
		}
		if err := mb.Validate(); err != nil {
			return fmt.Errorf("step: micro-batch %d: %w", i, err)
		}
		if err := mb.MicroBatch.Validate(0); err != nil {
			return fmt.Errorf("step: micro-batch %d: %w", i, err)
		}
		for _, sq := range mb.RefSeq {
			if sq < 0 || int(sq) >= len(s.Seqs) {
				return fmt.Errorf("step: micro-batch %d refers to sequence %d of %d", i, sq, len(s.Seqs))
			}
		}
	}
	return nil
}
