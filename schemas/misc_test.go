package schemas

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidatePathComponent(t *testing.T) {
	good := []string{"airline", "retail", "telecom", "telecom-workflow", "train_v2", "a.b", "A1"}
	bad := []string{"", ".", "..", "../../etc", "a/b", `a\b`, ".hidden", "a b", "a=b", "dömain", "x\x00", strings.Repeat("a", 129)}
	for _, s := range good {
		if err := ValidatePathComponent(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidatePathComponent(s); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%q accepted (err %v)", s, err)
		}
	}
}

func TestPartitionDir(t *testing.T) {
	at := time.Date(2026, 3, 4, 23, 30, 0, 0, time.FixedZone("x", -2*3600)) // 01:30 UTC next day
	dir, err := PartitionDir("airline", at)
	if err != nil || dir != "domain=airline/date=2026-03-05" {
		t.Fatalf("PartitionDir = %q, %v", dir, err)
	}
	p, err := ParsePartitionDir(dir)
	if err != nil || p.Domain != "airline" || !p.Date.Equal(time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("ParsePartitionDir = %+v, %v", p, err)
	}
	if _, err := PartitionDir("../../etc", at); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("traversal accepted: %v", err)
	}
	if _, err := PartitionDir("airline", time.Time{}); err == nil {
		t.Fatal("zero time accepted")
	}
	for _, s := range []string{"", "domain=a", "domain=../date=2026-01-01", "dom=a/date=2026-01-01", "domain=a/date=2026-13-01", "domain=a/day=2026-01-01"} {
		if _, err := ParsePartitionDir(s); err == nil {
			t.Errorf("ParsePartitionDir(%q) accepted", s)
		}
	}
}

func TestVersions_Parse(t *testing.T) {
	tests := []struct {
		in      string
		minor   int
		wantErr bool
	}{
		{"1.0", 0, false}, {"1.7", 7, false}, {"2.0", 0, true}, {"0.9", 0, true}, {"", 0, true},
		{"1", 0, true}, {"1.x", 0, true}, {"1.-1", 0, true}, {"+1.0", 0, true}, {"1.0.0", 0, true},
	}
	for _, tc := range tests {
		minor, err := CheckVersion(tc.in, "test")
		if tc.wantErr {
			var ve *VersionError
			if !errors.As(err, &ve) || !errors.Is(err, ErrUnsupportedVersion) || ve.Got != tc.in {
				t.Errorf("%q: err %v, want *VersionError", tc.in, err)
			}
			continue
		}
		if err != nil || minor != tc.minor {
			t.Errorf("%q: minor %d err %v", tc.in, minor, err)
		}
	}
	if SchemaVersion != "1.1" {
		t.Fatalf("SchemaVersion %q", SchemaVersion)
	}
}

func TestControlFraming(t *testing.T) {
	stale := int64(9)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	msgs := []struct {
		in, out validator
		key     string
	}{
		{&RolloutRequest{RequestID: "r1", TaskID: "12", Domain: "airline", Split: "train", GroupSize: 8, PolicyVersion: 7,
			StaleAfterVersion: &stale, Sampling: SamplingParams{Temperature: 1, TopP: 1, MaxTokens: 512}, IssuedAt: at}, &RolloutRequest{}, "12"},
		{&PolicyVersion{Version: 3, CheckpointPath: "/ckpt/3", Time: at}, &PolicyVersion{}, PolicyVersionKey},
		{&PolicyVersion{Version: 4, Time: at, InMemory: true}, &PolicyVersion{}, PolicyVersionKey},
		{&InfraError{TaskID: "12", TrajectoryID: "t1", Stage: "policy_llm", Error: "connection refused", Time: at}, &InfraError{}, "12"},
		{&DeadLetter{Topic: "trajectories", Partition: 2, Offset: 99, Key: []byte("12"), Value: []byte{0, 1, 255},
			Headers: map[string]string{"a": "b"}, Consumer: "archiver", Error: "bad", Time: at}, &DeadLetter{}, "12"},
	}
	for _, m := range msgs {
		f, err := FrameControl(m.in)
		if err != nil {
			t.Fatal(err)
		}
		if f.Key != m.key || f.Headers[HeaderSchemaVersion] != SchemaVersion || f.Headers[HeaderContentType] != ContentTypeJSON {
			t.Fatalf("%T: framed %+v", m.in, f)
		}
		if err := UnframeControl(f.Value, f.Headers, m.out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.in, m.out) {
			t.Fatalf("round trip %T: %+v != %+v", m.in, m.in, m.out)
		}
		// Wrong message type for the target is a framing error.
		if err := UnframeControl(f.Value, f.Headers, &struct{ RolloutRequest }{}); err == nil {
			t.Fatal("unknown control type accepted")
		}
	}
	req := msgs[0].in.(*RolloutRequest)
	f, _ := FrameControl(req)
	var pv PolicyVersion
	if err := UnframeControl(f.Value, f.Headers, &pv); !errors.Is(err, ErrFraming) {
		t.Fatalf("message type mismatch: %v", err)
	}
	h := Headers(ContentTypeJSON, MessageTypeRolloutRequest)
	h[HeaderSchemaVersion] = "2.0"
	if err := UnframeControl(f.Value, h, &RolloutRequest{}); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("v2 accepted: %v", err)
	}
	for _, bad := range []string{`{"request_id":"r"}`, `{"request_id":"r","task_id":"t","domain":"a","split":"b","group_size":0}`,
		`{"request_id":"r","task_id":"t","domain":"../x","split":"b","group_size":1}`, `not json`, `{"request_id":"r"} {}`} {
		if err := UnmarshalControl([]byte(bad), &RolloutRequest{}); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := FrameControl(&PolicyVersion{Version: 1}); err == nil {
		t.Fatal("invalid policy version framed")
	}
}

func TestStalenessRule(t *testing.T) {
	for _, tc := range []struct{ from, latest, maxOff int64 }{{0, 0, 0}, {3, 5, 2}, {3, 6, 2}, {10, 10, 0}, {0, 50, 7}} {
		after := StaleAfter(tc.from, tc.maxOff)
		if TooStale(tc.from, after, tc.maxOff) || !TooStale(tc.from, after+1, tc.maxOff) {
			t.Errorf("%+v: StaleAfter %d disagrees with TooStale", tc, after)
		}
		if got, want := TooStale(tc.from, tc.latest, tc.maxOff), tc.latest > after; got != want {
			t.Errorf("%+v: TooStale %v, want %v", tc, got, want)
		}
	}
}

// TestPolicyVersionPath: a version needs its checkpoint's path unless the servers took it from
// the trainer's memory (in_memory, CUDA IPC between checkpoints).
func TestPolicyVersionPath(t *testing.T) {
	for _, tc := range []struct {
		pv PolicyVersion
		ok bool
	}{
		{PolicyVersion{Version: 1, CheckpointPath: "/ckpt/v1"}, true},
		{PolicyVersion{Version: 2, InMemory: true}, true},
		{PolicyVersion{Version: 3}, false},
		{PolicyVersion{Version: -1, InMemory: true}, false},
	} {
		if err := tc.pv.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.pv, err, tc.ok)
		}
	}
}
