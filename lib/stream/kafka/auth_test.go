package kafka_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	tkafka "tau2rl/lib/stream/kafka"
)

// roundTrip creates the topics, writes one message and reads it back through
// a group, proving that every connection style (Client, Writer, Reader)
// authenticates with cfg.
func roundTrip(t *testing.T, cfg tkafka.Config) error {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
		return err
	}
	w, err := tkafka.NewWriter(cfg, cfg.Topics.Trajectories, nil)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Write(ctx, tkafka.Message{Key: []byte("k"), Value: []byte("hello")}); err != nil {
		return err
	}
	r, err := tkafka.NewGroupReader(cfg, "auth", []string{cfg.Topics.Trajectories}, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	msg, err := r.Fetch(ctx)
	if err != nil {
		return err
	}
	if string(msg.Value) != "hello" {
		t.Fatalf("read %q", msg.Value)
	}
	return r.Commit(ctx, msg)
}

func kfakeConfig(t *testing.T, opts ...kfake.Opt) tkafka.Config {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := tkafka.DefaultConfig()
	cfg.Brokers = c.ListenAddrs()
	cfg.Partitions = 2
	cfg.Reader.SessionTimeout = 6 * time.Second
	cfg.Reader.HeartbeatInterval = 500 * time.Millisecond
	cfg.DialTimeout = 3 * time.Second
	cfg.Writer.MaxAttempts = 2
	return cfg
}

func TestSASLMechanisms(t *testing.T) {
	for _, mech := range []string{tkafka.SASLPlain, tkafka.SASLScramSHA256, tkafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			cfg := kfakeConfig(t, kfake.EnableSASL(), kfake.Superuser(mech, "svc", "s3cret"))
			t.Setenv("TAU2_TEST_KAFKA_PW", "s3cret")
			cfg.SASL = tkafka.SASLConfig{Mechanism: mech, Username: "svc", PasswordEnv: "TAU2_TEST_KAFKA_PW"}
			if err := roundTrip(t, cfg); err != nil {
				t.Fatalf("%s round trip: %v", mech, err)
			}
			if err := tkafka.CheckAuth(testCtx(t, 10*time.Second), cfg); err != nil {
				t.Fatalf("%s: CheckAuth with the right password: %v", mech, err)
			}
			t.Setenv("TAU2_TEST_KAFKA_PW", "wrong")
			if err := tkafka.EnsureTopics(testCtx(t, 10*time.Second), cfg); err == nil {
				t.Fatalf("%s with a wrong password was accepted", mech)
			} else if !errors.Is(err, tkafka.ErrAuthentication) || !strings.Contains(err.Error(), "authentication failed") ||
				!strings.Contains(err.Error(), `user "svc"`) {
				t.Errorf("%s with a wrong password: %v, want it to say authentication failed", mech, err)
			}
			if err := tkafka.CheckAuth(testCtx(t, 10*time.Second), cfg); !errors.Is(err, tkafka.ErrAuthentication) {
				t.Errorf("%s: CheckAuth with a wrong password: %v", mech, err)
			}
		})
	}
	// An unreachable broker is not an authentication failure.
	cfg := tkafka.DefaultConfig()
	cfg.Brokers, cfg.DialTimeout = []string{"127.0.0.1:1"}, time.Second
	t.Setenv("TAU2_TEST_KAFKA_PW", "x")
	cfg.SASL = tkafka.SASLConfig{Mechanism: tkafka.SASLPlain, Username: "svc", PasswordEnv: "TAU2_TEST_KAFKA_PW"}
	if err := tkafka.CheckAuth(testCtx(t, 5*time.Second), cfg); err != nil {
		t.Errorf("unreachable broker: CheckAuth = %v, want nil (the connection error is the caller's)", err)
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, serverCert := selfSignedCA(t, dir)
	cfg := kfakeConfig(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}))
	cfg.TLS = tkafka.TLSConfig{Enabled: true, CAFile: caFile, ServerName: "127.0.0.1"}
	if err := roundTrip(t, cfg); err != nil {
		t.Fatalf("TLS round trip: %v", err)
	}
	// Without the CA the broker certificate is not trusted.
	cfg.TLS.CAFile = ""
	if err := tkafka.EnsureTopics(testCtx(t, 10*time.Second), cfg); err == nil {
		t.Fatal("untrusted broker certificate accepted")
	}
	cfg.TLS.CAFile = filepath.Join(dir, "missing.pem")
	if _, err := tkafka.NewWriter(cfg, cfg.Topics.Trajectories, nil); err == nil {
		t.Fatal("missing CA file accepted")
	}
}

// selfSignedCA writes a self-signed certificate for 127.0.0.1 as the CA file
// and returns it with its key as a server certificate.
func selfSignedCA(t *testing.T, dir string) (string, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tau2rl test broker"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return caFile, cert
}
