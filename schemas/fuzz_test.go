package schemas

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func seedArrow(f *testing.F) {
	f.Helper()
	good, err := EncodeBatch(goldenTrajectories())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-8])
	files, _ := filepath.Glob(filepath.Join("testdata", "*.arrow"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0})
}

// FuzzDecodeBatch: arbitrary bytes must decode or fail with an error, never panic or allocate
// unboundedly; whatever decodes must re-encode and decode to the same trajectories.
func FuzzDecodeBatch(f *testing.F) {
	seedArrow(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		trajs, err := DecodeBatch(data)
		if err != nil {
			return
		}
		for _, tr := range trajs {
			if tr.Validate() != nil {
				return // only valid trajectories must round-trip exactly
			}
		}
		again, err := EncodeBatch(trajs)
		if err != nil {
			t.Fatalf("decoded batch does not re-encode: %v", err)
		}
		if _, err := DecodeBatch(again); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
	})
}

// FuzzUnframeTrajectories fuzzes the header checks together with the payload.
func FuzzUnframeTrajectories(f *testing.F) {
	good, err := EncodeBatch(goldenTrajectories()[:2])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, ContentTypeArrowStream, "1.0", MessageTypeTrajectories)
	f.Add(good, ContentTypeArrowStream, "1.9", "")
	f.Add(good, ContentTypeJSON, "1.0", MessageTypeTrajectories)
	f.Add(good, ContentTypeArrowStream, "2.0", MessageTypeTrajectories)
	f.Add([]byte("x"), ContentTypeArrowStream, "01.00", MessageTypeTrajectories)
	f.Fuzz(func(t *testing.T, value []byte, ct, version, mt string) {
		h := map[string]string{HeaderContentType: ct, HeaderSchemaVersion: version}
		if mt != "" {
			h[HeaderMessageType] = mt
		}
		trajs, err := UnframeTrajectories(value, h)
		if err != nil {
			return
		}
		if ct != ContentTypeArrowStream {
			t.Fatalf("accepted content type %q", ct)
		}
		if _, err := CheckVersion(version, "fuzz"); err != nil {
			t.Fatalf("accepted version %q", version)
		}
		for _, tr := range trajs {
			if err := tr.Validate(); err != nil {
				t.Fatalf("unframed an invalid trajectory: %v", err)
			}
		}
	})
}

// FuzzUnframeControl fuzzes the JSON control messages.
func FuzzUnframeControl(f *testing.F) {
	f.Add([]byte(`{"request_id":"r","task_id":"1","domain":"airline","split":"train","group_size":4,"sampling":{"temperature":1}}`), MessageTypeRolloutRequest)
	f.Add([]byte(`{"version":3,"checkpoint_path":"/c"}`), MessageTypePolicyVersion)
	f.Add([]byte(`{"task_id":"1","stage":"x","error":"y","partial":{"id":"a"}}`), MessageTypeInfraError)
	f.Add([]byte(`{"topic":"t","error":"e","key":"AAE=","value":null}`), MessageTypeDeadLetter)
	f.Fuzz(func(t *testing.T, value []byte, mt string) {
		h := Headers(ContentTypeJSON, mt)
		targets := map[string]validator{
			MessageTypeRolloutRequest: &RolloutRequest{}, MessageTypePolicyVersion: &PolicyVersion{},
			MessageTypeInfraError: &InfraError{}, MessageTypeDeadLetter: &DeadLetter{},
		}
		for _, v := range targets {
			if err := UnframeControl(value, h, v); err == nil {
				if err := v.Validate(); err != nil {
					t.Fatalf("unframed an invalid %T", v)
				}
				if _, err := FrameControl(v); err != nil {
					t.Fatalf("accepted %T does not re-frame: %v", v, err)
				}
			}
		}
	})
}

// FuzzPartitionDir: parsing never accepts a path that escapes its directory.
func FuzzPartitionDir(f *testing.F) {
	f.Add("domain=airline/date=2026-01-02")
	f.Add("domain=../x/date=2026-01-02")
	f.Fuzz(func(t *testing.T, dir string) {
		p, err := ParsePartitionDir(dir)
		if err != nil {
			return
		}
		if ValidatePathComponent(p.Domain) != nil {
			t.Fatalf("accepted domain %q", p.Domain)
		}
		back, err := PartitionDir(p.Domain, p.Date)
		if err != nil || back != dir {
			t.Fatalf("%q re-renders as %q (%v)", dir, back, err)
		}
	})
}

// TestDecodeSurvivesMutations is a deterministic complement to FuzzDecodeBatch that runs in every
// `go test`: thousands of byte-mutated copies of a valid batch must decode or fail cleanly (a
// regression here is a crash or an out-of-memory, so reaching the end is the assertion).
func TestDecodeSurvivesMutations(t *testing.T) {
	good, err := EncodeBatch(goldenTrajectories())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	decoded := 0
	for it := 0; it < 5000; it++ {
		b := append([]byte(nil), good...)
		for k := 0; k < 1+rng.IntN(4); k++ {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		if _, err := DecodeBatch(b); err == nil {
			decoded++
		}
	}
	if decoded == 5000 {
		t.Fatal("no mutation was detected; the decoder checks nothing")
	}
}
