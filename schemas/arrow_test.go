package schemas

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func f64p(v float64) *float64 { return &v }

// goldenTrajectories covers the edge cases of every column: nil vs empty lists, null tool calls,
// explicit loss masks, multi-version runs, zero times, partial breakdowns, infra errors, tags.
func goldenTrajectories() []*Trajectory {
	at := time.Date(2026, 2, 3, 4, 5, 6, 789000, time.UTC)
	a := &Trajectory{
		ID: "00000000-0000-4000-8000-000000000001", TaskID: "12", Domain: "airline", Split: "test", RequestID: "req-1",
		Trial: 3, Seed: 424242, StartedAt: at, EndedAt: at.Add(90 * time.Second), PolicyVersionStart: 5,
		AgentModel: "qwen3-4b", UserModel: "gpt-4.1", Termination: TerminationUserStop, Reward: 1,
		RewardBasis: []string{BasisDB, BasisCommunicate}, Breakdown: RewardBreakdown{DB: f64p(1), Communicate: f64p(1)},
		RewardInfoJSON: `{"reward":1.0,"reward_basis":["DB","COMMUNICATE"]}`, ShapedReward: 0.9, InvalidFormatTurns: 1,
		Status: StatusOK, Tags: map[string]string{"host": "p1", "exp": "golden"},
	}
	a.AppendCall(CallInput{Prompt: seq(100, 12), Completion: seq(500, 4), BehaviorLogprobs: []float32{-0.1, -0.2, -0.3, 0},
		VersionRuns: []VersionRun{{5, 3}, {6, 1}}, FinishReason: "stop", LatencyMS: 12.5, ShapedReward: 0.81})
	a.AppendCall(CallInput{Prompt: cat(seq(100, 12), seq(500, 4), seq(900, 3)), Completion: seq(700, 3), BehaviorLogprobs: []float32{-1, -2, -3},
		Version: 6, LossMask: []uint8{1, 0, 1}, FinishReason: "stop", InvalidFormat: true, ShapedReward: 0.9})
	a.AppendCall(CallInput{Prompt: seq(100, 2), Completion: nil, BehaviorLogprobs: nil, Version: 6, LossMask: []uint8{}, FinishReason: "length"})
	a.Messages = []Message{
		{Role: RoleAssistant, Content: "Hi! How can I help you today?", Turn: 0, Timestamp: at, CallIndex: -1},
		{Role: RoleUser, Content: "cancel my trip ###STOP###?", Turn: 1, Timestamp: at.Add(time.Second), CallIndex: -1},
		{Role: RoleAssistant, Reasoning: "look it up", ToolCalls: []ToolCall{{ID: "c1", Name: "get_reservation_details", Arguments: `{"reservation_id":"Q69X3R"}`, Requestor: RequestorAssistant},
			{ID: "c2", Name: "get_user_details", Arguments: `{}`, Requestor: RequestorAssistant}}, Turn: 2, Timestamp: at.Add(2 * time.Second), CallIndex: 0},
		{Role: RoleTool, Content: `{"error":"not found"}`, ToolCallID: "c1", Requestor: RequestorAssistant, ToolError: true, Turn: 3, Timestamp: at.Add(3 * time.Second), CallIndex: -1},
		{Role: RoleUser, ToolCalls: []ToolCall{}, Turn: 4, CallIndex: -1},
		{Role: RoleAssistant, Content: "Done. 日本語 ✓", Turn: 5, Timestamp: at.Add(4 * time.Second), CallIndex: 1},
	}
	b := &Trajectory{
		ID: "00000000-0000-4000-8000-000000000002", TaskID: "12", Domain: "airline", Split: "test",
		Termination: TerminationMaxSteps, RewardBasis: []string{}, Status: StatusInfraError, Error: "user simulator: 503",
		Tags: map[string]string{},
	}
	c := &Trajectory{
		ID: "00000000-0000-4000-8000-000000000003", TaskID: "[mms_issue]x|y[PERSONA:Easy]", Domain: "telecom", Split: "train",
		Termination: TerminationAgentStop, Reward: 0, Breakdown: RewardBreakdown{EnvAssertion: f64p(0), Action: f64p(1), NLAssertion: f64p(0)},
		RewardBasis: []string{BasisEnvAssertion, BasisAction, BasisNLAssertion}, Status: StatusOK,
		Messages: []Message{{Role: RoleSystem, Content: "policy", CallIndex: -1}},
	}
	return []*Trajectory{a, b, c}
}

func roundTrip(t *testing.T, in []*Trajectory) []*Trajectory {
	t.Helper()
	data, err := EncodeBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestArrowRoundTripEdgeCases(t *testing.T) {
	in := goldenTrajectories()
	out := roundTrip(t, in)
	if len(out) != len(in) {
		t.Fatalf("%d rows, want %d", len(out), len(in))
	}
	for i := range in {
		if !reflect.DeepEqual(in[i], out[i]) {
			t.Errorf("row %d differs:\n in  %+v\n out %+v", i, in[i], out[i])
		}
	}
	// Distinctions the codec must keep.
	if out[1].RewardBasis == nil || out[2].RewardBasis == nil || out[0].Messages[4].ToolCalls == nil || out[0].Messages[0].ToolCalls != nil {
		t.Error("nil/empty list distinction lost")
	}
	if out[0].Calls[2].LossMask == nil || out[0].Calls[0].LossMask != nil {
		t.Error("loss mask null/empty distinction lost")
	}
	if out[2].Breakdown.DB != nil || *out[2].Breakdown.Action != 1 {
		t.Error("breakdown nullability lost")
	}
}

func TestArrowRoundTripSynthetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var in []*Trajectory
	for i := 0; i < 5; i++ {
		in = append(in, Synthetic(rng, DefaultSyntheticOptions()))
	}
	out := roundTrip(t, in)
	for i := range in {
		if !reflect.DeepEqual(in[i], out[i]) {
			t.Fatalf("synthetic row %d differs", i)
		}
		p1, _ := in[i].FullPrompts()
		p2, err := out[i].FullPrompts()
		if err != nil || !reflect.DeepEqual(p1, p2) {
			t.Fatalf("full prompts differ after decode: %v", err)
		}
	}
	// Decoded slices are capacity-capped: appending must not clobber the next call's tokens.
	next := append([]int32(nil), out[0].Calls[1].PromptTokens...)
	_ = append(out[0].Calls[0].CompletionTokens, 1, 2, 3)
	_ = append(out[0].Calls[0].PromptTokens, 1, 2, 3)
	if !reflect.DeepEqual(next, out[0].Calls[1].PromptTokens) {
		t.Fatal("append to a decoded slice overwrote a neighbour")
	}
}

func TestEncodeRejects(t *testing.T) {
	if _, err := EncodeBatch([]*Trajectory{nil}); err == nil {
		t.Fatal("nil trajectory encoded")
	}
	tr := goldenTrajectories()[0]
	tr.Messages[1].Turn = 1 << 40
	if _, err := EncodeBatch([]*Trajectory{goldenTrajectories()[1], tr}); err == nil || !strings.Contains(err.Error(), "int32 range") {
		t.Fatalf("out-of-range turn: %v", err)
	}
	// The pooled encoder must be clean after a rejected batch.
	out := roundTrip(t, goldenTrajectories()[1:2])
	if len(out) != 1 || out[0].ID != goldenTrajectories()[1].ID {
		t.Fatalf("encoder state leaked: %d rows", len(out))
	}
}

func TestSchemaMetadata(t *testing.T) {
	data, err := EncodeBatch(goldenTrajectories())
	if err != nil {
		t.Fatal(err)
	}
	rd, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if got := versionOf(rd.Schema()); got != SchemaVersion {
		t.Fatalf("schema version %q", got)
	}
	n := 0
	for rd.Next() {
		n++
	}
	if n != 1 {
		t.Fatalf("%d record batches, want 1", n)
	}
}

// variant rewrites a current-version record into another "writer version": extra top-level and
// nested columns (a future minor), dropped optional columns (an older minor), or another version.
func variant(t *testing.T, trajs []*Trajectory, version string, extra bool, drop map[string]bool) []byte {
	t.Helper()
	rec, err := NewRecord(trajs)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		if drop[f.Name] {
			continue
		}
		col := rec.Column(i)
		if extra && f.Name == ColCalls {
			// calls gain a nested field "top_logprobs": list<float32> (one empty list per call).
			l := col.(*array.List)
			st := l.ListValues().(*array.Struct)
			lb := array.NewListBuilder(goAlloc, arrow.PrimitiveTypes.Float32)
			for k := 0; k < st.Len(); k++ {
				lb.Append(true)
				lb.ValueBuilder().(*array.Float32Builder).Append(float32(k))
			}
			extraCol := lb.NewArray()
			var sc []arrow.Array
			var names []string
			for j, sf := range st.DataType().(*arrow.StructType).Fields() {
				if drop["calls."+sf.Name] {
					continue
				}
				sc = append(sc, st.Field(j))
				names = append(names, sf.Name)
			}
			nst, err := array.NewStructArray(append(sc, extraCol), append(names, "top_logprobs"))
			if err != nil {
				t.Fatal(err)
			}
			lt := arrow.ListOfNonNullable(nst.DataType())
			data := array.NewData(lt, l.Len(), l.Data().Buffers(), []arrow.ArrayData{nst.Data()}, l.NullN(), l.Data().Offset())
			col = array.NewListData(data)
			f = arrow.Field{Name: f.Name, Type: lt}
		}
		fields = append(fields, f)
		cols = append(cols, col)
	}
	if extra {
		sb := array.NewStringBuilder(goAlloc)
		for range trajs {
			sb.Append("future")
		}
		fields = append(fields, arrow.Field{Name: "novelty", Type: arrow.BinaryTypes.String})
		cols = append(cols, sb.NewArray())
	}
	md := arrow.NewMetadata([]string{MetadataKeyVersion}, []string{version})
	schema := arrow.NewSchema(fields, &md)
	out := array.NewRecord(schema, cols, rec.NumRows())
	defer out.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(out); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// golden compares data with testdata/name (rewriting it under -update) and returns the stored
// bytes, so the decoders are tested against files, not against the code that made them.
func golden(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./schemas -run Golden -update)", err)
	}
	return stored
}

func TestGoldenCurrentWriter(t *testing.T) {
	data, err := EncodeBatch(goldenTrajectories())
	if err != nil {
		t.Fatal(err)
	}
	stored := golden(t, "v1.1.arrow", data)
	// Byte-identical output guards against silent schema changes: a layout change must bump the
	// version and add a golden file, never rewrite this one.
	if !bytes.Equal(stored, data) {
		t.Fatal("EncodeBatch output differs from testdata/v1.1.arrow: the 1.1 layout changed (bump SchemaMinor/Major)")
	}
	out, err := DecodeBatch(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, goldenTrajectories()) {
		t.Fatal("v1.1 golden decodes differently")
	}
}

// TestGoldenOlderMinor: a file the 1.0 writer produced (testdata/v1.0.arrow, never rewritten) still
// decodes to the same trajectories; 1.1 only added the not_evaluated status value, so its bytes
// differ from the current writer's only in the version metadata.
func TestGoldenOlderMinor(t *testing.T) {
	stored, err := os.ReadFile(filepath.Join("testdata", "v1.0.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBatch(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, goldenTrajectories()) {
		t.Fatal("v1.0 golden decodes differently")
	}
	if _, err := UnframeTrajectories(stored, map[string]string{HeaderContentType: ContentTypeArrowStream, HeaderSchemaVersion: "1.0"}); err != nil {
		t.Fatalf("unframe 1.0: %v", err)
	}
}

// TestNotEvaluatedRoundTrip: the status added in 1.1 survives Arrow and keeps the real termination.
func TestNotEvaluatedRoundTrip(t *testing.T) {
	tr := goldenTrajectories()[0]
	tr.Status, tr.Error, tr.Termination = StatusNotEvaluated, "NL_ASSERTION not evaluated (no NL judge)", TerminationUserStop
	tr.Reward, tr.RewardBasis, tr.Breakdown, tr.RewardInfoJSON = 0, nil, RewardBreakdown{}, ""
	f, err := FrameTrajectories(tr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := UnframeTrajectories(f.Value, f.Headers)
	if err != nil || !reflect.DeepEqual(out[0], tr) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestGoldenFutureMinorWithExtraColumns(t *testing.T) {
	stored := golden(t, "v1.9-extra-columns.arrow", variant(t, goldenTrajectories(), "1.9", true, nil))
	out, err := DecodeBatch(stored)
	if err != nil {
		t.Fatalf("reader of 1.1 must accept a future 1.9 with added columns: %v", err)
	}
	if !reflect.DeepEqual(out, goldenTrajectories()) {
		t.Fatal("extra columns changed the decoded trajectories")
	}
	if _, err := UnframeTrajectories(stored, map[string]string{HeaderContentType: ContentTypeArrowStream, HeaderSchemaVersion: "1.9"}); err != nil {
		t.Fatalf("unframe 1.9: %v", err)
	}
}

func TestGoldenOlderMinorMissingOptionalColumns(t *testing.T) {
	drop := map[string]bool{ColTags: true, ColRequestID: true, ColBreakdown: true, ColStartedAt: true, ColRewardInfoJSON: true, "calls.latency_ms": true, "calls.loss_mask": true}
	stored := golden(t, "v1.0-minimal.arrow", variant(t, goldenTrajectories(), "1.0", true, drop))
	out, err := DecodeBatch(stored)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenTrajectories()
	for _, w := range want {
		w.Tags, w.RequestID, w.Breakdown, w.StartedAt, w.RewardInfoJSON = nil, "", RewardBreakdown{}, time.Time{}, ""
		for i := range w.Calls {
			w.Calls[i].LatencyMS, w.Calls[i].LossMask = 0, nil
		}
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatal("missing optional columns must decode as zero values")
	}
}

func TestGoldenUnknownMajor(t *testing.T) {
	stored := golden(t, "v2.0.arrow", variant(t, goldenTrajectories(), "2.0", false, nil))
	_, err := DecodeBatch(stored)
	var ve *VersionError
	if !errors.As(err, &ve) || !errors.Is(err, ErrUnsupportedVersion) || ve.Got != "2.0" {
		t.Fatalf("v2.0: %v, want *VersionError", err)
	}
}

func TestDecodeRejectsBadBatches(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"garbage", []byte("definitely not arrow"), ErrCorrupt},
		{"missing required column", variant(t, goldenTrajectories(), "1.0", false, map[string]bool{ColTaskID: true}), ErrCorrupt},
		{"missing required nested column", variant(t, goldenTrajectories(), "1.0", true, map[string]bool{"calls.completion_tokens": true}), ErrCorrupt},
		{"no version", variant(t, goldenTrajectories(), "", false, nil), ErrUnsupportedVersion},
		{"bad version", variant(t, goldenTrajectories(), "one", false, nil), ErrUnsupportedVersion},
	}
	good, _ := EncodeBatch(goldenTrajectories())
	tests = append(tests, struct {
		name string
		data []byte
		want error
	}{"truncated", good[:len(good)/2], ErrCorrupt})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeBatch(tc.data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	// A column of the wrong type.
	rec, _ := NewRecord(goldenTrajectories())
	defer rec.Release()
	fields := rec.Schema().Fields()
	cols := rec.Columns()
	ib := array.NewInt64Builder(goAlloc)
	for i := 0; i < int(rec.NumRows()); i++ {
		ib.Append(int64(i))
	}
	fields[iDomain] = arrow.Field{Name: ColDomain, Type: arrow.PrimitiveTypes.Int64}
	cols = append([]arrow.Array(nil), cols...)
	cols[iDomain] = ib.NewArray()
	md := arrow.NewMetadata([]string{MetadataKeyVersion}, []string{"1.0"})
	schema := arrow.NewSchema(fields, &md)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	w.Write(array.NewRecord(schema, cols, rec.NumRows()))
	w.Close()
	if _, err := DecodeBatch(buf.Bytes()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "domain") {
		t.Fatalf("wrong type: %v", err)
	}
}

func TestFrameTrajectories(t *testing.T) {
	in := goldenTrajectories()
	if _, err := FrameTrajectories(in...); err == nil {
		t.Fatal("trajectories of two tasks framed together")
	}
	if _, err := FrameTrajectories(); err == nil {
		t.Fatal("empty batch framed")
	}
	in2 := goldenTrajectories()[:2]
	f, err := FrameTrajectories(in2...)
	if err != nil {
		t.Fatal(err)
	}
	if f.Key != "12" || f.Headers[HeaderContentType] != ContentTypeArrowStream || f.Headers[HeaderSchemaVersion] != "1.1" || f.Headers[HeaderMessageType] != MessageTypeTrajectories {
		t.Fatalf("framed %q %v", f.Key, f.Headers)
	}
	out, err := UnframeTrajectories(f.Value, f.Headers)
	if err != nil || !reflect.DeepEqual(out, in2) {
		t.Fatalf("unframe: %v", err)
	}
	bad := goldenTrajectories()[0]
	bad.Domain = "../x"
	if _, err := FrameTrajectories(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid trajectory framed: %v", err)
	}
	for name, h := range map[string]map[string]string{
		"no headers":     nil,
		"content type":   {HeaderContentType: "application/json", HeaderSchemaVersion: "1.0"},
		"message type":   {HeaderContentType: ContentTypeArrowStream, HeaderSchemaVersion: "1.0", HeaderMessageType: MessageTypeInfraError},
		"header version": {HeaderContentType: ContentTypeArrowStream, HeaderSchemaVersion: "3.1"},
		"no version":     {HeaderContentType: ContentTypeArrowStream},
	} {
		if _, err := UnframeTrajectories(f.Value, h); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Decodable but semantically invalid rows are rejected by Unframe.
	raw, _ := EncodeBatch([]*Trajectory{bad})
	if _, err := UnframeTrajectories(raw, Headers(ContentTypeArrowStream, MessageTypeTrajectories)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid row unframed: %v", err)
	}
}

// TestEncodeBatchStreamMatchesFreshWriter pins writeStream's shortcut (cached schema message, an
// ipc.Writer kept open across calls): every EncodeBatch, including those after a rejected batch,
// must be byte for byte what a fresh ipc.Writer writes for the same record.
func TestEncodeBatchStreamMatchesFreshWriter(t *testing.T) {
	trajs := goldenTrajectories()
	rec, err := NewRecord(trajs)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var want bytes.Buffer
	w := ipc.NewWriter(&want, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if i == 2 {
			if _, err := EncodeBatch([]*Trajectory{nil}); err == nil {
				t.Fatal("nil trajectory accepted")
			}
		}
		got, err := EncodeBatch(trajs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("call %d: %d bytes differ from a fresh writer's %d", i, len(got), want.Len())
		}
	}
}
