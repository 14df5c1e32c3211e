package kafka_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

func TestDeadLetterRoundTrip(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 30*time.Second)
	if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	m, _ := tkafka.NewMetrics(nil)
	dl, err := tkafka.NewDeadLetters(cfg, "archiver", m)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	orig := tkafka.Message{
		Topic: cfg.Topics.Trajectories, Partition: 3, Offset: 41,
		Key: []byte("task-7"), Value: []byte("\x00not arrow"),
		Headers: []tkafka.Header{{Key: "content-type", Value: []byte("application/vnd.apache.arrow.stream")}},
		Time:    time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
	}
	if err := dl.DeadLetter(ctx, orig, errors.New("decode: bad magic")); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.DeadLetters.WithLabelValues(cfg.Topics.Trajectories)); got != 1 {
		t.Fatalf("dead letter counter = %v", got)
	}
	r, err := tkafka.NewGroupReader(cfg, "ops", []string{cfg.Topics.DeadLetters}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Key, orig.Key) || !bytes.Equal(got.Value, orig.Value) {
		t.Fatalf("dead letter changed key/value: %q %q", got.Key, got.Value)
	}
	if got.Headers[0].Key != "content-type" {
		t.Fatalf("original headers not kept first: %v", got.Headers)
	}
	info, err := tkafka.ParseDeadLetter(got)
	if err != nil {
		t.Fatal(err)
	}
	want := tkafka.DeadLetterInfo{Error: "decode: bad magic", Topic: orig.Topic, Partition: 3, Offset: 41, Consumer: "archiver", OriginTime: orig.Time}
	info.At = time.Time{}
	if info != want {
		t.Fatalf("parsed %+v, want %+v", info, want)
	}
}

func TestBuildDeadLetterTruncates(t *testing.T) {
	val := bytes.Repeat([]byte("x"), 5000)
	msg := tkafka.Message{Topic: "t", Partition: 0, Offset: 9, Key: []byte("k"), Value: val,
		Headers: []tkafka.Header{{Key: "dlq.error", Value: []byte("older failure")}}}
	dl := tkafka.BuildDeadLetter(msg, errors.New(strings.Repeat("e", 10000)), "c", time.Unix(0, 0), 4096)
	if n := tkafka.MessageSize(dl); n > 4096 {
		t.Fatalf("dead letter is %d bytes, limit 4096", n)
	}
	info, err := tkafka.ParseDeadLetter(dl)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(val)
	if info.TruncatedFrom != 5000 || info.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("truncation not recorded: %+v", info)
	}
	if !strings.HasPrefix(info.Error, "eeee") || len(info.Error) > 4100 {
		t.Fatalf("error text not bounded: %d bytes", len(info.Error))
	}
	if !bytes.Equal(dl.Value, val[:len(dl.Value)]) {
		t.Fatal("truncated value is not a prefix of the original")
	}
}

func TestParseDeadLetterRejects(t *testing.T) {
	base := []tkafka.Header{
		{Key: tkafka.HeaderDLError, Value: []byte("boom")},
		{Key: tkafka.HeaderDLTopic, Value: []byte("t")},
		{Key: tkafka.HeaderDLPartition, Value: []byte("1")},
		{Key: tkafka.HeaderDLOffset, Value: []byte("2")},
	}
	with := func(hs ...tkafka.Header) []tkafka.Header { return append(append([]tkafka.Header{}, base...), hs...) }
	cases := []struct {
		name    string
		headers []tkafka.Header
		want    string
	}{
		{"not a dead letter", nil, "missing header"},
		{"missing offset", base[:3], "missing header dlq.origin.offset"},
		{"repeated header", with(tkafka.Header{Key: tkafka.HeaderDLPartition, Value: []byte("1")}), "repeated"},
		{"bad partition", append(append([]tkafka.Header{}, base[:2]...), tkafka.Header{Key: tkafka.HeaderDLPartition, Value: []byte("x")}, base[3]), "dlq.origin.partition"},
		{"negative offset", append(append([]tkafka.Header{}, base[:3]...), tkafka.Header{Key: tkafka.HeaderDLOffset, Value: []byte("-5")}), "negative"},
		{"bad time", with(tkafka.Header{Key: tkafka.HeaderDLAt, Value: []byte("yesterday")}), "dlq.at"},
		{"sha without size", with(tkafka.Header{Key: tkafka.HeaderDLSHA256, Value: []byte(strings.Repeat("ab", 32))}), "together"},
		{"bad sha", with(tkafka.Header{Key: tkafka.HeaderDLSHA256, Value: []byte("zz")}), "SHA-256"},
		{"invalid utf8", with(tkafka.Header{Key: tkafka.HeaderDLConsumer, Value: []byte{0xff}}), "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tkafka.ParseDeadLetter(tkafka.Message{Headers: tc.headers})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzParseDeadLetter(f *testing.F) {
	good := tkafka.BuildDeadLetter(tkafka.Message{Topic: "t", Partition: 1, Offset: 2, Value: []byte("v")}, errors.New("e"), "c", time.Unix(1, 0), 1<<20)
	var keys, vals []string
	for _, h := range good.Headers {
		keys = append(keys, h.Key)
		vals = append(vals, string(h.Value))
	}
	f.Add(strings.Join(keys, "\n"), strings.Join(vals, "\n"), []byte("v"))
	f.Add("dlq.truncated\ndlq.sha256", "10\n"+strings.Repeat("0", 64), []byte("0123456789abc"))
	f.Add("dlq.offset", "99999999999999999999999", []byte{})
	f.Fuzz(func(t *testing.T, ks, vs string, value []byte) {
		kk, vv := strings.Split(ks, "\n"), strings.Split(vs, "\n")
		var hs []tkafka.Header
		for i := range kk {
			v := ""
			if i < len(vv) {
				v = vv[i]
			}
			hs = append(hs, tkafka.Header{Key: kk[i], Value: []byte(v)})
		}
		info, err := tkafka.ParseDeadLetter(tkafka.Message{Headers: hs, Value: value})
		if err != nil {
			return
		}
		// Anything accepted is a complete, consistent dead letter.
		if info.Offset < 0 || info.Partition < 0 || info.TruncatedFrom < 0 {
			t.Fatalf("accepted negative position: %+v", info)
		}
		if info.TruncatedFrom > 0 && info.TruncatedFrom < len(value) {
			t.Fatalf("accepted truncation below stored size: %+v", info)
		}
	})
}
