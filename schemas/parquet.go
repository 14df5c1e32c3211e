package schemas

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// ParquetRow is one trajectory as a row of the Parquet archive. Column names and nesting match
// the Arrow schema (list<struct> for messages, tool calls, calls and version runs), so the same
// SQL works on both. Nullable columns are pointers or optional lists; a nil list and an empty
// list stay distinct where τ² distinguishes them (reward_basis, tool_calls, loss_mask, tags).
type ParquetRow struct {
	ID                 string            `parquet:"id"`
	TaskID             string            `parquet:"task_id,dict"`
	Domain             string            `parquet:"domain,dict"`
	Split              string            `parquet:"split,dict"`
	RequestID          string            `parquet:"request_id"`
	Trial              int32             `parquet:"trial"`
	Seed               int64             `parquet:"seed"`
	StartedAt          *time.Time        `parquet:"started_at,timestamp(microsecond),optional"`
	EndedAt            *time.Time        `parquet:"ended_at,timestamp(microsecond),optional"`
	PolicyVersionStart int64             `parquet:"policy_version_start"`
	AgentModel         string            `parquet:"agent_model,dict"`
	UserModel          string            `parquet:"user_model,dict"`
	Messages           []ParquetMessage  `parquet:"messages,list"`
	Termination        string            `parquet:"termination,dict"`
	Reward             float64           `parquet:"reward"`
	RewardBasis        []string          `parquet:"reward_basis,list,optional"`
	Breakdown          ParquetBreakdown  `parquet:"breakdown"`
	RewardInfoJSON     string            `parquet:"reward_info_json"`
	ShapedReward       float64           `parquet:"shaped_reward"`
	InvalidFormatTurns int32             `parquet:"invalid_format_turns"`
	Calls              []ParquetCall     `parquet:"calls,list"`
	Status             string            `parquet:"status,dict"`
	Error              string            `parquet:"error"`
	Tags               map[string]string `parquet:"tags,optional"`
}

// ParquetBreakdown mirrors RewardBreakdown; nil = component not in the basis.
type ParquetBreakdown struct {
	DB           *float64 `parquet:"db,optional"`
	EnvAssertion *float64 `parquet:"env_assertion,optional"`
	Action       *float64 `parquet:"action,optional"`
	Communicate  *float64 `parquet:"communicate,optional"`
	NLAssertion  *float64 `parquet:"nl_assertion,optional"`
}

// ParquetMessage mirrors Message.
type ParquetMessage struct {
	Role       string            `parquet:"role,dict"`
	Content    string            `parquet:"content"`
	Reasoning  string            `parquet:"reasoning"`
	ToolCalls  []ParquetToolCall `parquet:"tool_calls,list,optional"`
	ToolCallID string            `parquet:"tool_call_id"`
	Requestor  string            `parquet:"requestor,dict"`
	ToolError  bool              `parquet:"tool_error"`
	Turn       int32             `parquet:"turn"`
	Timestamp  *time.Time        `parquet:"timestamp,timestamp(microsecond),optional"`
	CallIndex  int32             `parquet:"call_index"`
}

// ParquetToolCall mirrors ToolCall.
type ParquetToolCall struct {
	ID        string `parquet:"id"`
	Name      string `parquet:"name,dict"`
	Arguments string `parquet:"arguments"`
	Requestor string `parquet:"requestor,dict"`
}

// ParquetVersionRun mirrors VersionRun.
type ParquetVersionRun struct {
	Version int64 `parquet:"version"`
	Count   int32 `parquet:"count"`
}

// ParquetCall mirrors LLMCall. The loss mask is stored as list<int32> (0/1) because parquet-go
// v0.32.0 reads list<uint8> back empty; it is null in the common all-trained case, so this costs
// nothing there.
type ParquetCall struct {
	PromptRef        int32               `parquet:"prompt_ref"`
	PromptShared     int32               `parquet:"prompt_shared"`
	PromptTokens     []int32             `parquet:"prompt_tokens,list"`
	CompletionTokens []int32             `parquet:"completion_tokens,list"`
	BehaviorLogprobs []float32           `parquet:"behavior_logprobs,list"`
	VersionRuns      []ParquetVersionRun `parquet:"version_runs,list"`
	LossMask         []int32             `parquet:"loss_mask,list,optional"`
	ShapedReward     float64             `parquet:"shaped_reward"`
	FinishReason     string              `parquet:"finish_reason,dict"`
	InvalidFormat    bool                `parquet:"invalid_format"`
	LatencyMS        float64             `parquet:"latency_ms"`
}

// ParquetSchema is the Parquet schema of the archive.
var ParquetSchema = parquet.SchemaOf(ParquetRow{})

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func timeVal(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC().Truncate(time.Microsecond)
}

// ToParquetRow converts a trajectory (slices are shared, not copied). It fails only when an int
// field does not fit its int32 column.
func ToParquetRow(t *Trajectory) (ParquetRow, error) {
	if err := checkRanges(t); err != nil {
		return ParquetRow{}, fmt.Errorf("schemas: parquet row: %w", err)
	}
	r := ParquetRow{
		ID: t.ID, TaskID: t.TaskID, Domain: t.Domain, Split: t.Split, RequestID: t.RequestID,
		Trial: int32(t.Trial), Seed: t.Seed, StartedAt: timePtr(t.StartedAt), EndedAt: timePtr(t.EndedAt),
		PolicyVersionStart: t.PolicyVersionStart, AgentModel: t.AgentModel, UserModel: t.UserModel,
		Termination: t.Termination, Reward: t.Reward, RewardBasis: t.RewardBasis,
		Breakdown: ParquetBreakdown{DB: t.Breakdown.DB, EnvAssertion: t.Breakdown.EnvAssertion, Action: t.Breakdown.Action,
			Communicate: t.Breakdown.Communicate, NLAssertion: t.Breakdown.NLAssertion},
		RewardInfoJSON: t.RewardInfoJSON, ShapedReward: t.ShapedReward, InvalidFormatTurns: int32(t.InvalidFormatTurns),
		Status: string(t.Status), Error: t.Error, Tags: t.Tags,
	}
	if len(t.Messages) > 0 {
		r.Messages = make([]ParquetMessage, len(t.Messages))
	}
	for i := range t.Messages {
		m := &t.Messages[i]
		pm := ParquetMessage{Role: string(m.Role), Content: m.Content, Reasoning: m.Reasoning, ToolCallID: m.ToolCallID,
			Requestor: m.Requestor, ToolError: m.ToolError, Turn: int32(m.Turn), Timestamp: timePtr(m.Timestamp), CallIndex: int32(m.CallIndex)}
		if m.ToolCalls != nil {
			pm.ToolCalls = make([]ParquetToolCall, len(m.ToolCalls))
			for k, tc := range m.ToolCalls {
				pm.ToolCalls[k] = ParquetToolCall(tc)
			}
		}
		r.Messages[i] = pm
	}
	if len(t.Calls) > 0 {
		r.Calls = make([]ParquetCall, len(t.Calls))
	}
	for i := range t.Calls {
		c := &t.Calls[i]
		pc := ParquetCall{PromptRef: int32(c.PromptRef), PromptShared: int32(c.PromptShared), PromptTokens: c.PromptTokens,
			CompletionTokens: c.CompletionTokens, BehaviorLogprobs: c.BehaviorLogprobs, ShapedReward: c.ShapedReward,
			FinishReason: c.FinishReason, InvalidFormat: c.InvalidFormat, LatencyMS: c.LatencyMS}
		if len(c.VersionRuns) > 0 {
			pc.VersionRuns = make([]ParquetVersionRun, len(c.VersionRuns))
			for k, vr := range c.VersionRuns {
				pc.VersionRuns[k] = ParquetVersionRun(vr)
			}
		}
		if c.LossMask != nil {
			pc.LossMask = make([]int32, len(c.LossMask))
			for k, v := range c.LossMask {
				pc.LossMask[k] = int32(v)
			}
		}
		r.Calls[i] = pc
	}
	return r, nil
}

func nilIfEmptyI32(s []int32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return s
}

// FromParquetRow converts a row back (slices are shared, not copied). Loss-mask values other than
// 0/1 are an error, since the Parquet column is wider than the Go type.
func FromParquetRow(r *ParquetRow) (*Trajectory, error) {
	t := &Trajectory{
		ID: r.ID, TaskID: r.TaskID, Domain: r.Domain, Split: r.Split, RequestID: r.RequestID,
		Trial: int(r.Trial), Seed: r.Seed, StartedAt: timeVal(r.StartedAt), EndedAt: timeVal(r.EndedAt),
		PolicyVersionStart: r.PolicyVersionStart, AgentModel: r.AgentModel, UserModel: r.UserModel,
		Termination: r.Termination, Reward: r.Reward, RewardBasis: r.RewardBasis,
		Breakdown: RewardBreakdown{DB: r.Breakdown.DB, EnvAssertion: r.Breakdown.EnvAssertion, Action: r.Breakdown.Action,
			Communicate: r.Breakdown.Communicate, NLAssertion: r.Breakdown.NLAssertion},
		RewardInfoJSON: r.RewardInfoJSON, ShapedReward: r.ShapedReward, InvalidFormatTurns: int(r.InvalidFormatTurns),
		Status: Status(r.Status), Error: r.Error, Tags: r.Tags,
	}
	if len(r.Messages) > 0 {
		t.Messages = make([]Message, len(r.Messages))
	}
	for i := range r.Messages {
		pm := &r.Messages[i]
		m := Message{Role: Role(pm.Role), Content: pm.Content, Reasoning: pm.Reasoning, ToolCallID: pm.ToolCallID,
			Requestor: pm.Requestor, ToolError: pm.ToolError, Turn: int(pm.Turn), Timestamp: timeVal(pm.Timestamp), CallIndex: int(pm.CallIndex)}
		if pm.ToolCalls != nil {
			m.ToolCalls = make([]ToolCall, len(pm.ToolCalls))
			for k, tc := range pm.ToolCalls {
				m.ToolCalls[k] = ToolCall(tc)
			}
		}
		t.Messages[i] = m
	}
	if len(r.Calls) > 0 {
		t.Calls = make([]LLMCall, len(r.Calls))
	}
	for i := range r.Calls {
		pc := &r.Calls[i]
		c := LLMCall{PromptRef: int(pc.PromptRef), PromptShared: int(pc.PromptShared), PromptTokens: nilIfEmptyI32(pc.PromptTokens),
			CompletionTokens: nilIfEmptyI32(pc.CompletionTokens), ShapedReward: pc.ShapedReward,
			FinishReason: pc.FinishReason, InvalidFormat: pc.InvalidFormat, LatencyMS: pc.LatencyMS}
		if len(pc.BehaviorLogprobs) > 0 {
			c.BehaviorLogprobs = pc.BehaviorLogprobs
		}
		if len(pc.VersionRuns) > 0 {
			c.VersionRuns = make([]VersionRun, len(pc.VersionRuns))
			for k, vr := range pc.VersionRuns {
				c.VersionRuns[k] = VersionRun(vr)
			}
		}
		if pc.LossMask != nil {
			c.LossMask = make([]uint8, len(pc.LossMask))
			for k, v := range pc.LossMask {
				if v != 0 && v != 1 {
					return nil, fmt.Errorf("schemas: parquet row %s call %d: loss mask value %d at %d (want 0 or 1)", r.ID, i, v, k)
				}
				c.LossMask[k] = uint8(v)
			}
		}
		t.Calls[i] = c
	}
	return t, nil
}

// ParquetWriterOptions configure NewParquetWriter, the one Parquet writer of the project: the
// archiver's files, releases' rewritten files and the dataset writer all go through it, so they
// share one configuration with one set of defaults. Compression is always zstd: parquet-go's LZ4
// reader corrupts data (parquet-go/parquet-go#608), so LZ4 is not offered. The YAML keys are the
// archiver's and a release's `parquet.*` settings.
type ParquetWriterOptions struct {
	// RowGroupRows caps the rows per row group (0: the default 256, about 25–60 MB of uncompressed
	// token data for 8k-token episodes, a good unit for DuckDB's parallel scan).
	RowGroupRows int64 `yaml:"row_group_rows"`
	// ZstdLevel is "fastest" (the default), "default", "better" or "best". fastest writes about
	// 2.5× faster than default for about 7% larger files (building-blocks §3), which matters on a
	// 2-core archiver that writes all day; a release copies most archive files byte for byte, so
	// its rewritten files at the same level match them. Set better or best for a release meant to
	// be downloaded many times.
	ZstdLevel string `yaml:"zstd_level"`
	// PageBufferSize is the per-column page buffer in bytes (0: the default 1 MiB; else ≥ 1 KiB).
	PageBufferSize int `yaml:"page_buffer_size"`
	// Metadata are extra key-value pairs for the file footer (the schema version is always added
	// and cannot be set here).
	Metadata map[string]string `yaml:"metadata"`
	// CreatedBy names the writing program in the footer's created_by field, with the schema
	// version (empty: "tau2rl"); the archiver's files say "tau2rl archiver". Not configurable.
	CreatedBy string `yaml:"-"`
}

// DefaultParquetWriterOptions returns the defaults documented on ParquetWriterOptions.
func DefaultParquetWriterOptions() ParquetWriterOptions {
	return ParquetWriterOptions{RowGroupRows: 256, ZstdLevel: "fastest", PageBufferSize: 1 << 20}
}

// Validate reports every setting NewParquetWriter would refuse, each by its configuration key
// (the options are the `parquet` section of the archiver's and a release's configuration).
func (o ParquetWriterOptions) Validate() error {
	var errs []error
	if _, err := zstdLevel(o.ZstdLevel); err != nil {
		errs = append(errs, err)
	}
	if o.RowGroupRows < 0 {
		errs = append(errs, fmt.Errorf("parquet.row_group_rows: %d must be ≥ 1 (or 0 for the default 256)", o.RowGroupRows))
	}
	if o.PageBufferSize < 0 || o.PageBufferSize > 0 && o.PageBufferSize < 1<<10 {
		errs = append(errs, fmt.Errorf("parquet.page_buffer_size: %d must be ≥ 1 KiB (or 0 for the default 1 MiB)", o.PageBufferSize))
	}
	if _, ok := o.Metadata[MetadataKeyVersion]; ok {
		errs = append(errs, fmt.Errorf("parquet.metadata: key %q is reserved (the writer sets the schema version)", MetadataKeyVersion))
	}
	return errors.Join(errs...)
}

func zstdLevel(s string) (zstd.Level, error) {
	switch s {
	case "", "fastest":
		return zstd.SpeedFastest, nil
	case "default":
		return zstd.SpeedDefault, nil
	case "better":
		return zstd.SpeedBetterCompression, nil
	case "best":
		return zstd.SpeedBestCompression, nil
	}
	return 0, fmt.Errorf("parquet.zstd_level: %q is not fastest, default, better or best", s)
}

// ParquetWriter writes trajectories as Parquet rows (zstd, schema version in the footer).
type ParquetWriter struct {
	w    *parquet.GenericWriter[ParquetRow]
	rows int64
	buf  []ParquetRow
}

// NewParquetWriter starts a Parquet file on w. The caller must Close it (which writes the footer)
// and then make the file durable (fsync + rename is the caller's: lib/durable, or the archiver's
// file system).
func NewParquetWriter(w io.Writer, opts ParquetWriterOptions) (*ParquetWriter, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("schemas: parquet writer: %w", err)
	}
	def := DefaultParquetWriterOptions()
	if opts.RowGroupRows == 0 {
		opts.RowGroupRows = def.RowGroupRows
	}
	if opts.PageBufferSize == 0 {
		opts.PageBufferSize = def.PageBufferSize
	}
	if opts.CreatedBy == "" {
		opts.CreatedBy = "tau2rl"
	}
	level, _ := zstdLevel(opts.ZstdLevel)
	wopts := []parquet.WriterOption{
		ParquetSchema,
		parquet.Compression(&zstd.Codec{Level: level}),
		parquet.MaxRowsPerRowGroup(opts.RowGroupRows),
		parquet.PageBufferSize(opts.PageBufferSize),
		parquet.KeyValueMetadata(MetadataKeyVersion, SchemaVersion),
		parquet.CreatedBy(opts.CreatedBy, SchemaVersion, ""),
	}
	keys := make([]string, 0, len(opts.Metadata))
	for k := range opts.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the footer's order does not follow map iteration
	for _, k := range keys {
		wopts = append(wopts, parquet.KeyValueMetadata(k, opts.Metadata[k]))
	}
	return &ParquetWriter{w: parquet.NewGenericWriter[ParquetRow](w, wopts...)}, nil
}

// SetKeyValueMetadata sets a footer key-value pair before Close, for what is known only at the
// end (the archiver's source offsets and row count).
func (w *ParquetWriter) SetKeyValueMetadata(key, value string) { w.w.SetKeyValueMetadata(key, value) }

// Size estimates the file's size so far, buffered rows included (the archiver rolls files by it).
func (w *ParquetWriter) Size() int64 { return w.w.Size() }

// Write appends trajectories as rows. Row groups are cut automatically at RowGroupRows.
func (w *ParquetWriter) Write(trajs []*Trajectory) error {
	w.buf = w.buf[:0]
	for _, t := range trajs {
		r, err := ToParquetRow(t)
		if err != nil {
			return err
		}
		w.buf = append(w.buf, r)
	}
	n, err := w.w.Write(w.buf)
	w.rows += int64(n)
	clear(w.buf) // drop references to the caller's slices
	if err != nil {
		return fmt.Errorf("schemas: parquet write: %w", err)
	}
	return nil
}

// Flush ends the current row group.
func (w *ParquetWriter) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("schemas: parquet flush: %w", err)
	}
	return nil
}

// Rows is the number of rows written so far.
func (w *ParquetWriter) Rows() int64 { return w.rows }

// Close flushes and writes the footer; it does not close the underlying writer.
func (w *ParquetWriter) Close() error {
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("schemas: parquet close: %w", err)
	}
	return nil
}

// CheckParquetFile verifies a Parquet file's schema version (footer key-value metadata) and that
// every required column is present, so readers reject an unknown major before reading rows.
func CheckParquetFile(f *parquet.File) error {
	v, _ := f.Lookup(MetadataKeyVersion)
	if _, err := CheckVersion(v, "parquet metadata"); err != nil {
		return err
	}
	for name := range requiredColumns {
		if f.Root().Column(name) == nil {
			return fmt.Errorf("schemas: parquet file: %w: missing required column %q", ErrCorrupt, name)
		}
	}
	return checkParquetTypes("", ParquetSchema, f.Schema())
}

// checkParquetTypes compares every column of got that this build knows (by name, at any depth)
// with its type in want: the physical type, its length, the logical type (string, timestamp unit,
// integer width and sign, list, map) and leaf versus group must agree. parquet-go would otherwise
// convert a changed type silently on read (an int64 trial wrapped into int32, a text reward
// parsed as a number), which the version rules make an error: a type change is a major bump.
// Columns this build does not know are ignored (a minor bump adds them); absent optional columns
// are allowed (they decode as zero values).
func checkParquetTypes(path string, want, got parquet.Node) error {
	name := path
	if name == "" {
		name = "(root)"
	}
	corrupt := func(format string, a ...any) error {
		return fmt.Errorf("schemas: parquet file: %w: column %q: %s", ErrCorrupt, name, fmt.Sprintf(format, a...))
	}
	if want.Leaf() != got.Leaf() {
		kind := func(n parquet.Node) string {
			if n.Leaf() {
				return "a " + n.Type().String() + " value"
			}
			return "a group"
		}
		return corrupt("is %s, this reader expects %s", kind(got), kind(want))
	}
	if want.Repeated() != got.Repeated() {
		return corrupt("repetition changed (repeated %v, expected %v)", got.Repeated(), want.Repeated())
	}
	if want.Leaf() {
		wt, gt := want.Type(), got.Type()
		if wt.Kind() != gt.Kind() || wt.Length() != gt.Length() || logicalTypeString(wt) != logicalTypeString(gt) {
			return corrupt("type %s, this reader expects %s (a changed type needs a new major version)", typeString(gt), typeString(wt))
		}
		return nil
	}
	if logicalTypeString(want.Type()) != logicalTypeString(got.Type()) {
		return corrupt("group of logical type %s, this reader expects %s", logicalTypeString(got.Type()), logicalTypeString(want.Type()))
	}
	known := map[string]parquet.Field{}
	for _, f := range want.Fields() {
		known[f.Name()] = f
	}
	for _, g := range got.Fields() {
		w, ok := known[g.Name()]
		if !ok {
			continue
		}
		sub := g.Name()
		if path != "" {
			sub = path + "." + sub
		}
		if err := checkParquetTypes(sub, w, g); err != nil {
			return err
		}
	}
	return nil
}

func logicalTypeString(t parquet.Type) string {
	if t == nil {
		return "none"
	}
	if lt := t.LogicalType(); lt != nil {
		return lt.String()
	}
	return "none"
}

func typeString(t parquet.Type) string {
	return fmt.Sprintf("%s (logical %s)", t.Kind(), logicalTypeString(t))
}
