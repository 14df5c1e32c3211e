package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// connection holds what both kafka-go connection styles need: a Transport
// (Writer, Client) and a Dialer (Reader). Both carry the same TLS and SASL.
type connection struct {
	transport *kafkago.Transport
	dialer    *kafkago.Dialer
	// newTransport returns a Transport with the same settings as
	// transport but its own connections and metadata cache.
	newTransport func() *kafkago.Transport
}

func newConnection(cfg *Config) (*connection, error) {
	tlsCfg, err := cfg.TLS.build()
	if err != nil {
		return nil, err
	}
	mech, err := cfg.SASL.mechanism()
	if err != nil {
		return nil, err
	}
	newTransport := func() *kafkago.Transport {
		return &kafkago.Transport{
			ClientID:    cfg.ClientID,
			DialTimeout: cfg.DialTimeout,
			TLS:         tlsCfg,
			SASL:        mech,
		}
	}
	return &connection{
		transport:    newTransport(),
		newTransport: newTransport,
		dialer: &kafkago.Dialer{
			ClientID:      cfg.ClientID,
			Timeout:       cfg.DialTimeout,
			DualStack:     true,
			TLS:           tlsCfg,
			SASLMechanism: mech,
		},
	}, nil
}

// build turns TLSConfig into a *tls.Config, or nil when TLS is disabled.
func (t TLSConfig) build() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as testing only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka tls: read ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka tls: ca_file %s holds no PEM certificate", t.CAFile)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka tls: load client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// mechanism builds the kafka-go SASL mechanism, or nil for none.
func (s SASLConfig) mechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "", SASLNone:
		return nil, nil
	}
	pw, err := s.password()
	if err != nil {
		return nil, err
	}
	switch s.Mechanism {
	case SASLPlain:
		return plain.Mechanism{Username: s.Username, Password: pw}, nil
	case SASLScramSHA256, SASLScramSHA512:
		algo := scram.SHA256
		if s.Mechanism == SASLScramSHA512 {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, s.Username, pw)
		if err != nil {
			return nil, fmt.Errorf("kafka sasl: %s: %w", s.Mechanism, err)
		}
		return m, nil
	default:
		return nil, fmt.Errorf("kafka sasl: unknown mechanism %q", s.Mechanism)
	}
}
