package schemas

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

func writeParquet(t *testing.T, trajs []*Trajectory, opts ParquetWriterOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewParquetWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(trajs); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != int64(len(trajs)) {
		t.Fatalf("Rows() = %d", w.Rows())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readParquet[T any](t *testing.T, data []byte) (*parquet.File, []T) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewGenericReader[T](bytes.NewReader(data))
	defer r.Close()
	rows := make([]T, r.NumRows())
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return f, rows[:n]
}

func fromRows(t *testing.T, rows []ParquetRow) []*Trajectory {
	t.Helper()
	out := make([]*Trajectory, len(rows))
	for i := range rows {
		tr, err := FromParquetRow(&rows[i])
		if err != nil {
			t.Fatal(err)
		}
		out[i] = tr
	}
	return out
}

func TestParquetRoundTrip(t *testing.T) {
	in := goldenTrajectories()
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 3; i++ {
		in = append(in, Synthetic(rng, DefaultSyntheticOptions()))
	}
	opts := DefaultParquetWriterOptions()
	opts.RowGroupRows = 2
	opts.Metadata = map[string]string{"writer": "test"}
	data := writeParquet(t, in, opts)
	f, rows := readParquet[ParquetRow](t, data)
	if err := CheckParquetFile(f); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Lookup(MetadataKeyVersion); v != SchemaVersion {
		t.Fatalf("version metadata %q", v)
	}
	if v, _ := f.Lookup("writer"); v != "test" {
		t.Fatalf("extra metadata %q", v)
	}
	if len(f.RowGroups()) != 3 {
		t.Fatalf("%d row groups, want 3 (2 rows each)", len(f.RowGroups()))
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			if c.MetaData.Codec.String() != "ZSTD" {
				t.Fatalf("column %v codec %v, want ZSTD", c.MetaData.PathInSchema, c.MetaData.Codec)
			}
		}
	}
	out := fromRows(t, rows)
	for i := range in {
		if !reflect.DeepEqual(in[i], out[i]) {
			t.Errorf("row %d differs:\n in  %+v\n out %+v", i, in[i], out[i])
		}
	}
	if out[1].RewardBasis == nil || out[0].Messages[4].ToolCalls == nil || out[0].Calls[2].LossMask == nil || out[1].Tags == nil {
		t.Error("nil/empty distinction lost")
	}
}

func TestParquetWriterOptions(t *testing.T) {
	for _, lvl := range []string{"fastest", "default", "better", "best", ""} {
		o := DefaultParquetWriterOptions()
		o.ZstdLevel = lvl
		data := writeParquet(t, goldenTrajectories(), o)
		_, rows := readParquet[ParquetRow](t, data)
		if len(rows) != 3 {
			t.Fatalf("level %q: %d rows", lvl, len(rows))
		}
	}
	if _, err := NewParquetWriter(io.Discard, ParquetWriterOptions{ZstdLevel: "lz4"}); err == nil {
		t.Fatal("unknown level accepted")
	}
	if _, err := NewParquetWriter(io.Discard, ParquetWriterOptions{Metadata: map[string]string{MetadataKeyVersion: "9.9"}}); err == nil {
		t.Fatal("version key override accepted")
	}
	var buf bytes.Buffer
	w, _ := NewParquetWriter(&buf, DefaultParquetWriterOptions())
	bad := goldenTrajectories()[0]
	bad.Trial = 1 << 40
	if err := w.Write([]*Trajectory{bad}); err == nil {
		t.Fatal("out-of-range trial written")
	}
}

func TestFromParquetRowRejectsBadMask(t *testing.T) {
	r, err := ToParquetRow(goldenTrajectories()[0])
	if err != nil {
		t.Fatal(err)
	}
	r.Calls[1].LossMask = []int32{1, 2, 0}
	if _, err := FromParquetRow(&r); err == nil {
		t.Fatal("loss mask value 2 accepted")
	}
}

// parquetRowV11 is a future-minor row: every 1.0 column plus new top-level and nested ones.
type parquetRowV11 struct {
	ParquetRow
	Novelty string `parquet:"novelty"`
}

// parquetRowMinimal is an older-minor row missing optional columns.
type parquetRowMinimal struct {
	ID          string           `parquet:"id"`
	TaskID      string           `parquet:"task_id"`
	Domain      string           `parquet:"domain"`
	Split       string           `parquet:"split"`
	Messages    []ParquetMessage `parquet:"messages,list"`
	Reward      float64          `parquet:"reward"`
	Calls       []ParquetCall    `parquet:"calls,list"`
	Status      string           `parquet:"status"`
	Termination string           `parquet:"termination"`
}

func TestParquetEvolution(t *testing.T) {
	in := goldenTrajectories()
	var v11 []parquetRowV11
	var minimal []parquetRowMinimal
	for _, tr := range in {
		r, err := ToParquetRow(tr)
		if err != nil {
			t.Fatal(err)
		}
		v11 = append(v11, parquetRowV11{ParquetRow: r, Novelty: "x"})
		minimal = append(minimal, parquetRowMinimal{ID: r.ID, TaskID: r.TaskID, Domain: r.Domain, Split: r.Split, Messages: r.Messages,
			Reward: r.Reward, Calls: r.Calls, Status: r.Status, Termination: r.Termination})
	}
	write := func(rows any, version string) []byte {
		var buf bytes.Buffer
		var err error
		switch rs := rows.(type) {
		case []parquetRowV11:
			w := parquet.NewGenericWriter[parquetRowV11](&buf, parquet.KeyValueMetadata(MetadataKeyVersion, version))
			if _, err = w.Write(rs); err == nil {
				err = w.Close()
			}
		case []parquetRowMinimal:
			w := parquet.NewGenericWriter[parquetRowMinimal](&buf, parquet.KeyValueMetadata(MetadataKeyVersion, version))
			if _, err = w.Write(rs); err == nil {
				err = w.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}

	f, rows := readParquet[ParquetRow](t, write(v11, "1.9"))
	if err := CheckParquetFile(f); err != nil {
		t.Fatalf("future minor 1.9 rejected: %v", err)
	}
	if got := fromRows(t, rows); !reflect.DeepEqual(got, in) {
		t.Fatal("1.9 file with an extra column decodes differently")
	}

	f, rows = readParquet[ParquetRow](t, write(minimal, "1.0"))
	if err := CheckParquetFile(f); err != nil {
		t.Fatal(err)
	}
	want := goldenTrajectories()
	for _, w := range want {
		w.RequestID, w.Trial, w.Seed, w.StartedAt, w.EndedAt, w.PolicyVersionStart = "", 0, 0, time.Time{}, time.Time{}, 0
		w.AgentModel, w.UserModel, w.RewardBasis, w.Breakdown, w.RewardInfoJSON = "", "", nil, RewardBreakdown{}, ""
		w.ShapedReward, w.InvalidFormatTurns, w.Error, w.Tags = 0, 0, "", nil
	}
	got := fromRows(t, rows)
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("minimal row %d:\n got  %+v\n want %+v", i, got[i], want[i])
		}
	}

	f, _ = readParquet[ParquetRow](t, write(v11, "2.0"))
	if err := CheckParquetFile(f); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("2.0 accepted: %v", err)
	}
	type noCalls struct {
		ID string `parquet:"id"`
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[noCalls](&buf, parquet.KeyValueMetadata(MetadataKeyVersion, "1.0"))
	w.Write([]noCalls{{ID: "a"}})
	w.Close()
	f, _ = readParquet[noCalls](t, buf.Bytes())
	if err := CheckParquetFile(f); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("file without required columns accepted: %v", err)
	}
}

// changedTypeFile writes a 1.0 file whose rows have the required columns plus
// one column of a changed type, as a writer that broke the contract would.
func changedTypeFile[T any](t *testing.T, rows []T) *parquet.File {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, parquet.KeyValueMetadata(MetadataKeyVersion, "1.0"))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestParquetChangedTypeIsCorrupt: docs/SCHEMA.md says a changed column type is ErrCorrupt.
// parquet-go converts silently on read (an int64 trial of 2^32+7 comes back as 7, a text reward
// is parsed), so CheckParquetFile compares every known column's type before rows are read
// (issue 13 item 6).
func TestParquetChangedTypeIsCorrupt(t *testing.T) {
	type base struct {
		ID       string           `parquet:"id"`
		TaskID   string           `parquet:"task_id"`
		Domain   string           `parquet:"domain"`
		Split    string           `parquet:"split"`
		Messages []ParquetMessage `parquet:"messages,list"`
		Calls    []ParquetCall    `parquet:"calls,list"`
		Status   string           `parquet:"status"`
	}
	b := base{ID: "a", TaskID: "t", Domain: "airline", Split: "train", Status: "ok"}
	type int64Trial struct {
		base
		Reward float64 `parquet:"reward"`
		Trial  int64   `parquet:"trial"`
	}
	type textReward struct {
		base
		Reward string `parquet:"reward"`
	}
	type uint32Trial struct {
		base
		Reward float64 `parquet:"reward"`
		Trial  uint32  `parquet:"trial,uint(32)"`
	}
	type millisStart struct {
		base
		Reward    float64    `parquet:"reward"`
		StartedAt *time.Time `parquet:"started_at,timestamp(millisecond),optional"`
	}
	type msgWide struct {
		Role string `parquet:"role"`
		Turn int64  `parquet:"turn"`
	}
	type nestedTurn struct {
		ID       string        `parquet:"id"`
		TaskID   string        `parquet:"task_id"`
		Domain   string        `parquet:"domain"`
		Split    string        `parquet:"split"`
		Messages []msgWide     `parquet:"messages,list"`
		Calls    []ParquetCall `parquet:"calls,list"`
		Status   string        `parquet:"status"`
		Reward   float64       `parquet:"reward"`
	}
	type callWide struct {
		PromptTokens []int64 `parquet:"prompt_tokens,list"`
	}
	type nestedTokens struct {
		ID       string           `parquet:"id"`
		TaskID   string           `parquet:"task_id"`
		Domain   string           `parquet:"domain"`
		Split    string           `parquet:"split"`
		Messages []ParquetMessage `parquet:"messages,list"`
		Calls    []callWide       `parquet:"calls,list"`
		Status   string           `parquet:"status"`
		Reward   float64          `parquet:"reward"`
	}
	type scalarBasis struct {
		base
		Reward      float64 `parquet:"reward"`
		RewardBasis string  `parquet:"reward_basis"`
	}
	now := time.Now()
	tests := []struct {
		name string
		file *parquet.File
		want string
	}{
		{"int64 trial", changedTypeFile(t, []int64Trial{{base: b, Trial: 1<<32 + 7}}), `"trial"`},
		{"text reward", changedTypeFile(t, []textReward{{base: b, Reward: "1.0"}}), `"reward"`},
		{"unsigned trial", changedTypeFile(t, []uint32Trial{{base: b, Trial: 3}}), `"trial"`},
		{"timestamp unit", changedTypeFile(t, []millisStart{{base: b, StartedAt: &now}}), `"started_at"`},
		{"nested turn int64", changedTypeFile(t, []nestedTurn{{ID: "a", TaskID: "t", Domain: "d", Split: "s", Status: "ok", Messages: []msgWide{{Role: "user", Turn: 1}}}}), `"messages.list.element.turn"`},
		{"nested tokens int64", changedTypeFile(t, []nestedTokens{{ID: "a", TaskID: "t", Domain: "d", Split: "s", Status: "ok", Calls: []callWide{{PromptTokens: []int64{1}}}}}), `prompt_tokens`},
		{"list became scalar", changedTypeFile(t, []scalarBasis{{base: b, RewardBasis: "DB"}}), `"reward_basis"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckParquetFile(tc.file)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckParquetFile = %v, want ErrCorrupt naming %s", err, tc.want)
			}
		})
	}
	// The files this build writes, and the evolution goldens, still pass (TestParquetEvolution);
	// an int32 trial written by hand with the same types passes too.
	type sameTypes struct {
		base
		Reward float64 `parquet:"reward"`
		Trial  int32   `parquet:"trial"`
	}
	if err := CheckParquetFile(changedTypeFile(t, []sameTypes{{base: b, Trial: 3}})); err != nil {
		t.Fatalf("file with the contract's types rejected: %v", err)
	}
}

// TestParquetWriterOptionsValidate: every setting NewParquetWriter refuses is reported by its
// configuration key (the archiver's and a release's `parquet` section), and the zero value is the
// defaults.
func TestParquetWriterOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*ParquetWriterOptions)
		want string // "" accepted
	}{
		{"defaults", func(*ParquetWriterOptions) {}, ""},
		{"zero value", func(o *ParquetWriterOptions) { *o = ParquetWriterOptions{} }, ""},
		{"every level", func(o *ParquetWriterOptions) { o.ZstdLevel = "best" }, ""},
		{"lz4", func(o *ParquetWriterOptions) { o.ZstdLevel = "lz4" }, `parquet.zstd_level: "lz4" is not fastest, default, better or best`},
		{"negative rows", func(o *ParquetWriterOptions) { o.RowGroupRows = -1 }, "parquet.row_group_rows: -1 must be ≥ 1"},
		{"tiny page buffer", func(o *ParquetWriterOptions) { o.PageBufferSize = 100 }, "parquet.page_buffer_size: 100 must be ≥ 1 KiB"},
		{"reserved key", func(o *ParquetWriterOptions) { o.Metadata = map[string]string{MetadataKeyVersion: "9.9"} }, "parquet.metadata: key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultParquetWriterOptions()
			tc.mut(&o)
			err := o.Validate()
			_, werr := NewParquetWriter(io.Discard, o)
			switch {
			case tc.want == "" && (err != nil || werr != nil):
				t.Fatalf("refused: %v / %v", err, werr)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			case tc.want != "" && werr == nil:
				t.Fatal("NewParquetWriter accepted what Validate refuses")
			}
		})
	}
}
