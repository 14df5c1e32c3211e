package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// ErrAuthentication marks a SASL authentication failure: the broker was reached and refused the
// credentials.
var ErrAuthentication = errors.New("kafka: SASL authentication failed")

// CheckAuth authenticates once against the first broker that answers and reports a refused
// login as ErrAuthentication, naming the mechanism, user and broker. Without it a wrong password
// surfaces only as "Metadata: unexpected EOF" from a writer or an admin request (a broker may
// answer a failed SASL exchange by closing the connection), and a group reader retries silently.
// It returns nil when SASL is off, when authentication succeeded, and when no broker could be
// reached (the caller's own connection reports that, with its retries).
func CheckAuth(ctx context.Context, cfg Config) error {
	if cfg.SASL.Mechanism == "" || cfg.SASL.Mechanism == SASLNone {
		return nil
	}
	mech, err := cfg.SASL.mechanism()
	if err != nil {
		return err
	}
	tlsCfg, err := cfg.TLS.build()
	if err != nil {
		return err
	}
	for _, broker := range cfg.Brokers {
		tm := &trackedMechanism{Mechanism: mech}
		d := &kafkago.Dialer{ClientID: cfg.ClientID, Timeout: cfg.DialTimeout, DualStack: true, TLS: tlsCfg, SASLMechanism: tm}
		conn, err := d.DialContext(ctx, "tcp", broker)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		if errors.Is(err, kafkago.SASLAuthenticationFailed) || (tm.started.Load() && !tm.done.Load()) {
			src := "kafka.sasl.password_env " + cfg.SASL.PasswordEnv
			if cfg.SASL.PasswordEnv == "" {
				src = "kafka.sasl.password_file " + cfg.SASL.PasswordFile
			}
			return fmt.Errorf("%w: broker %s refused %s login of user %q (check kafka.sasl.username and the password from %s): %v",
				ErrAuthentication, broker, cfg.SASL.Mechanism, cfg.SASL.Username, src, err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// trackedMechanism records whether a SASL exchange began and whether it completed, so a
// connection closed in between can be told apart from one that never connected.
type trackedMechanism struct {
	sasl.Mechanism
	started, done atomic.Bool
}

func (m *trackedMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	sm, ir, err := m.Mechanism.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	m.started.Store(true)
	return trackedState{StateMachine: sm, m: m}, ir, nil
}

type trackedState struct {
	sasl.StateMachine
	m *trackedMechanism
}

func (s trackedState) Next(ctx context.Context, challenge []byte) (bool, []byte, error) {
	done, resp, err := s.StateMachine.Next(ctx, challenge)
	if done && err == nil {
		s.m.done.Store(true)
	}
	return done, resp, err
}

// ErrNoBroker says that no broker of kafka.brokers could be reached.
var ErrNoBroker = errors.New("kafka: no broker answers")

// CheckBrokers connects once to the brokers of cfg (TLS and SASL included) and returns nil as
// soon as one answers. When none does it returns ErrNoBroker naming every address with its
// dial error and what to do: start a broker (tau2-broker, for development) or point
// kafka.brokers at the cluster. Batch commands (tau2-replay) call it before they report ready,
// so a missing broker is one clear line at start rather than a dial error from the first
// publish. A refused SASL login is CheckAuth's to report; here it counts as an answer.
func CheckBrokers(ctx context.Context, cfg Config) error {
	conn, err := newConnection(&cfg)
	if err != nil {
		return err
	}
	var errs []string
	for _, broker := range cfg.Brokers {
		c, err := conn.dialer.DialContext(ctx, "tcp", broker)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if errors.Is(err, kafkago.SASLAuthenticationFailed) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("%w at kafka.brokers %v (%s): start one (for development: tau2-broker) or set kafka.brokers to your cluster's bootstrap servers",
		ErrNoBroker, cfg.Brokers, strings.Join(errs, "; "))
}
