package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// DecodeBatch decodes an Arrow IPC stream written by EncodeBatch (any 1.x minor; several record
// batches are accepted). Columns are matched by name: unknown columns are ignored, missing
// optional columns decode as zero values, a missing required column or a wrong type is an error
// wrapping ErrCorrupt, and an unknown major version is a *VersionError.
//
// Decoded token, logprob and mask slices and strings share memory with the decoded batch (Go
// memory, kept alive by the garbage collector); slices are capacity-capped, so appending to one
// copies instead of overwriting its neighbour. Malformed input yields an error, never a panic.
func DecodeBatch(data []byte) (trajs []*Trajectory, err error) {
	defer func() {
		// The Arrow IPC reader trusts buffer lengths and offsets in its input; a corrupt payload can
		// make it (or an accessor) index out of range. Turn that into an error for dead-lettering.
		if r := recover(); r != nil {
			trajs = nil
			err = fmt.Errorf("schemas: decode: %w: %v", ErrCorrupt, r)
		}
	}()
	if len(data) == 0 {
		return nil, fmt.Errorf("schemas: decode: %w: empty payload", ErrCorrupt)
	}
	// Bound allocations by the payload size: an uncompressed stream never needs more memory than
	// it carries, and a corrupt length must not be able to allocate gigabytes.
	if err := preflightIPC(data); err != nil {
		return nil, fmt.Errorf("schemas: decode: %w: %v", ErrCorrupt, err)
	}
	mem := &boundedAllocator{limit: 2*int64(len(data)) + 1<<16}
	rd, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(mem))
	if err != nil {
		return nil, fmt.Errorf("schemas: decode: %w: %v", ErrCorrupt, err)
	}
	defer rd.Release()
	schema := rd.Schema()
	if _, err := CheckVersion(versionOf(schema), "arrow schema metadata"); err != nil {
		return nil, err
	}
	for rd.Next() {
		rec := rd.Record()
		batch, err := decodeRecord(rec)
		if err != nil {
			return nil, fmt.Errorf("schemas: decode: %w", err)
		}
		trajs = append(trajs, batch...)
	}
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("schemas: decode: %w: %v", ErrCorrupt, err)
	}
	if trajs == nil {
		return nil, fmt.Errorf("schemas: decode: %w: stream holds no record batch", ErrCorrupt)
	}
	return trajs, nil
}

func versionOf(s *arrow.Schema) string {
	md := s.Metadata()
	if i := md.FindKey(MetadataKeyVersion); i >= 0 {
		return md.Values()[i]
	}
	return ""
}

// errAllocLimit is the panic value of boundedAllocator (recovered by DecodeBatch).
var errAllocLimit = errors.New("allocation limit exceeded")

// boundedAllocator is a Go allocator that refuses to hand out more than limit bytes in total.
type boundedAllocator struct {
	limit, used int64
}

func (a *boundedAllocator) Allocate(size int) []byte {
	a.charge(size)
	return goAlloc.Allocate(size)
}

func (a *boundedAllocator) Reallocate(size int, b []byte) []byte {
	a.charge(size - len(b))
	return goAlloc.Reallocate(size, b)
}

func (a *boundedAllocator) Free(b []byte) { goAlloc.Free(b) }

func (a *boundedAllocator) charge(n int) {
	if n < 0 {
		return
	}
	a.used += int64(n)
	if a.used > a.limit {
		panic(fmt.Errorf("%w: %d bytes > %d", errAllocLimit, a.used, a.limit))
	}
}

var _ memory.Allocator = (*boundedAllocator)(nil)

// columns looks up the children of a record or struct by name.
type columns struct {
	where  string
	byName map[string]arrow.Array
	n      int
	// top marks record columns, whose buffers get checkArray'd (recursively) when first used.
	top bool
}

func recordColumns(rec arrow.Record) columns {
	c := columns{where: "batch", byName: make(map[string]arrow.Array, rec.NumCols()), n: int(rec.NumRows()), top: true}
	for i, f := range rec.Schema().Fields() {
		c.byName[f.Name] = rec.Column(i)
	}
	return c
}

func structColumns(where string, a arrow.Array) (columns, error) {
	st, ok := a.(*array.Struct)
	if !ok {
		return columns{}, fmt.Errorf("%w: %s is %s, want a struct", ErrCorrupt, where, a.DataType())
	}
	typ := st.DataType().(*arrow.StructType)
	c := columns{where: where, byName: make(map[string]arrow.Array, st.NumField()), n: st.Len()}
	for i, f := range typ.Fields() {
		c.byName[f.Name] = st.Field(i)
	}
	return c, nil
}

// get returns the named child with the wanted type id, nil when it is absent and optional.
func (c columns) get(name string, id arrow.Type, required bool) (arrow.Array, error) {
	a, ok := c.byName[name]
	if !ok {
		if required {
			return nil, fmt.Errorf("%w: %s: missing required column %q", ErrCorrupt, c.where, name)
		}
		return nil, nil
	}
	if a.DataType().ID() != id {
		return nil, fmt.Errorf("%w: %s: column %q is %s, want %s", ErrCorrupt, c.where, name, a.DataType(), id)
	}
	if a.Len() != c.n {
		return nil, fmt.Errorf("%w: %s: column %q has %d rows, want %d", ErrCorrupt, c.where, name, a.Len(), c.n)
	}
	if c.top {
		if err := checkArray(a.Data(), 0); err != nil {
			return nil, fmt.Errorf("%w: column %q: %v", ErrCorrupt, name, err)
		}
	}
	return a, nil
}

// Typed accessors; a nil array (absent optional column) and null slots read as zero.

type strCol struct{ a *array.String }

func (c strCol) at(i int) string {
	if c.a == nil || c.a.IsNull(i) {
		return ""
	}
	return c.a.Value(i)
}

type i32Col struct{ a *array.Int32 }

func (c i32Col) at(i int) int32 {
	if c.a == nil || c.a.IsNull(i) {
		return 0
	}
	return c.a.Value(i)
}

type i64Col struct{ a *array.Int64 }

func (c i64Col) at(i int) int64 {
	if c.a == nil || c.a.IsNull(i) {
		return 0
	}
	return c.a.Value(i)
}

type f64Col struct{ a *array.Float64 }

func (c f64Col) at(i int) float64 {
	if c.a == nil || c.a.IsNull(i) {
		return 0
	}
	return c.a.Value(i)
}

func (c f64Col) opt(i int) *float64 {
	if c.a == nil || c.a.IsNull(i) {
		return nil
	}
	v := c.a.Value(i)
	return &v
}

type boolCol struct{ a *array.Boolean }

func (c boolCol) at(i int) bool { return c.a != nil && !c.a.IsNull(i) && c.a.Value(i) }

type tsCol struct {
	a    *array.Timestamp
	unit arrow.TimeUnit
}

func (c tsCol) at(i int) time.Time {
	if c.a == nil || c.a.IsNull(i) {
		return time.Time{}
	}
	return c.a.Value(i).ToTime(c.unit).UTC()
}

// listCol is a list column with checked offsets into its values.
type listCol struct {
	l    *array.List
	nval int
}

// span returns the [start,end) range of row i in the child array, checking bounds (IPC offsets
// are not validated by the reader). Null or absent rows are empty and null.
func (c listCol) span(i int) (start, end int, null bool, err error) {
	if c.l == nil || c.l.IsNull(i) {
		return 0, 0, true, nil
	}
	s, e := c.l.ValueOffsets(i)
	if s < 0 || e < s || e > int64(c.nval) {
		return 0, 0, false, fmt.Errorf("%w: list offsets [%d,%d) outside %d values", ErrCorrupt, s, e, c.nval)
	}
	return int(s), int(e), false, nil
}

func (c columns) str(name string, req bool) (strCol, error) {
	a, err := c.get(name, arrow.STRING, req)
	if a == nil {
		return strCol{}, err
	}
	return strCol{a.(*array.String)}, nil
}

func (c columns) i32(name string, req bool) (i32Col, error) {
	a, err := c.get(name, arrow.INT32, req)
	if a == nil {
		return i32Col{}, err
	}
	return i32Col{a.(*array.Int32)}, nil
}

func (c columns) i64(name string, req bool) (i64Col, error) {
	a, err := c.get(name, arrow.INT64, req)
	if a == nil {
		return i64Col{}, err
	}
	return i64Col{a.(*array.Int64)}, nil
}

func (c columns) f64(name string, req bool) (f64Col, error) {
	a, err := c.get(name, arrow.FLOAT64, req)
	if a == nil {
		return f64Col{}, err
	}
	return f64Col{a.(*array.Float64)}, nil
}

func (c columns) boolean(name string, req bool) (boolCol, error) {
	a, err := c.get(name, arrow.BOOL, req)
	if a == nil {
		return boolCol{}, err
	}
	return boolCol{a.(*array.Boolean)}, nil
}

func (c columns) ts(name string, req bool) (tsCol, error) {
	a, err := c.get(name, arrow.TIMESTAMP, req)
	if a == nil {
		return tsCol{}, err
	}
	return tsCol{a.(*array.Timestamp), a.DataType().(*arrow.TimestampType).Unit}, nil
}

// list returns a list column and its child values (nil child when the column is absent).
func (c columns) list(name string, req bool) (listCol, arrow.Array, error) {
	a, err := c.get(name, arrow.LIST, req)
	if a == nil {
		return listCol{}, nil, err
	}
	l := a.(*array.List)
	vals := l.ListValues()
	return listCol{l: l, nval: vals.Len()}, vals, nil
}

// listOf returns a list column whose values must have the given primitive type id.
func (c columns) listOf(name string, id arrow.Type, req bool) (listCol, arrow.Array, error) {
	lc, vals, err := c.list(name, req)
	if err != nil || vals == nil {
		return lc, nil, err
	}
	if vals.DataType().ID() != id {
		return listCol{}, nil, fmt.Errorf("%w: %s: column %q holds %s, want %s", ErrCorrupt, c.where, name, vals.DataType(), id)
	}
	return lc, vals, nil
}

// structList returns a list<struct> column and the columns of its struct values.
func (c columns) structList(name string, req bool) (listCol, columns, error) {
	lc, vals, err := c.list(name, req)
	if err != nil || vals == nil {
		return lc, columns{}, err
	}
	sc, err := structColumns(c.where+"."+name, vals)
	return lc, sc, err
}

// Slices alias Arrow buffers, capacity-capped (see DecodeBatch).

func i32Slice(vals []int32, s, e int) []int32 {
	if s == e {
		return nil
	}
	return vals[s:e:e]
}

func f32Slice(vals []float32, s, e int) []float32 {
	if s == e {
		return nil
	}
	return vals[s:e:e]
}

// decoders for the nested types, built once per record.

type toolCallDec struct {
	id, name, args, requestor strCol
}

type messageDec struct {
	role, content, reasoning, toolCallID, requestor strCol
	toolCalls                                       listCol
	tc                                              toolCallDec
	toolError                                       boolCol
	turn, callIndex                                 i32Col
	timestamp                                       tsCol
}

type callDec struct {
	ref, shared                 i32Col
	prompt, completion, logprob listCol
	promptV, completionV        []int32
	logprobV                    []float32
	runs                        listCol
	runVersion                  i64Col
	runCount                    i32Col
	lossMask                    listCol
	lossMaskV                   []uint8
	shaped, latency             f64Col
	finish                      strCol
	invalid                     boolCol
}

func newMessageDec(mc columns) (d messageDec, err error) {
	if d.role, err = mc.str("role", true); err != nil {
		return d, err
	}
	if d.content, err = mc.str("content", true); err != nil {
		return d, err
	}
	if d.reasoning, err = mc.str("reasoning", false); err != nil {
		return d, err
	}
	if d.toolCallID, err = mc.str("tool_call_id", false); err != nil {
		return d, err
	}
	if d.requestor, err = mc.str("requestor", false); err != nil {
		return d, err
	}
	if d.toolError, err = mc.boolean("tool_error", false); err != nil {
		return d, err
	}
	if d.turn, err = mc.i32("turn", false); err != nil {
		return d, err
	}
	if d.callIndex, err = mc.i32("call_index", false); err != nil {
		return d, err
	}
	if d.timestamp, err = mc.ts("timestamp", false); err != nil {
		return d, err
	}
	var tcc columns
	if d.toolCalls, tcc, err = mc.structList("tool_calls", false); err != nil {
		return d, err
	}
	if d.toolCalls.l != nil {
		if d.tc.id, err = tcc.str("id", false); err != nil {
			return d, err
		}
		if d.tc.name, err = tcc.str("name", true); err != nil {
			return d, err
		}
		if d.tc.args, err = tcc.str("arguments", true); err != nil {
			return d, err
		}
		if d.tc.requestor, err = tcc.str("requestor", false); err != nil {
			return d, err
		}
	}
	return d, nil
}

func newCallDec(cc columns) (d callDec, err error) {
	if d.ref, err = cc.i32("prompt_ref", true); err != nil {
		return d, err
	}
	if d.shared, err = cc.i32("prompt_shared", true); err != nil {
		return d, err
	}
	var v arrow.Array
	if d.prompt, v, err = cc.listOf("prompt_tokens", arrow.INT32, true); err != nil {
		return d, err
	}
	d.promptV = v.(*array.Int32).Int32Values()
	if d.completion, v, err = cc.listOf("completion_tokens", arrow.INT32, true); err != nil {
		return d, err
	}
	d.completionV = v.(*array.Int32).Int32Values()
	if d.logprob, v, err = cc.listOf("behavior_logprobs", arrow.FLOAT32, true); err != nil {
		return d, err
	}
	d.logprobV = v.(*array.Float32).Float32Values()
	var rc columns
	if d.runs, rc, err = cc.structList("version_runs", true); err != nil {
		return d, err
	}
	if d.runVersion, err = rc.i64("version", true); err != nil {
		return d, err
	}
	if d.runCount, err = rc.i32("count", true); err != nil {
		return d, err
	}
	if d.lossMask, v, err = cc.listOf("loss_mask", arrow.UINT8, false); err != nil {
		return d, err
	}
	if v != nil {
		d.lossMaskV = v.(*array.Uint8).Uint8Values()
	}
	if d.shaped, err = cc.f64("shaped_reward", false); err != nil {
		return d, err
	}
	if d.latency, err = cc.f64("latency_ms", false); err != nil {
		return d, err
	}
	if d.finish, err = cc.str("finish_reason", false); err != nil {
		return d, err
	}
	if d.invalid, err = cc.boolean("invalid_format", false); err != nil {
		return d, err
	}
	return d, nil
}

func (d *messageDec) decode(j int) (Message, error) {
	m := Message{
		Role:       Role(d.role.at(j)),
		Content:    d.content.at(j),
		Reasoning:  d.reasoning.at(j),
		ToolCallID: d.toolCallID.at(j),
		Requestor:  d.requestor.at(j),
		ToolError:  d.toolError.at(j),
		Turn:       int(d.turn.at(j)),
		Timestamp:  d.timestamp.at(j),
		CallIndex:  int(d.callIndex.at(j)),
	}
	s, e, null, err := d.toolCalls.span(j)
	if err != nil {
		return m, fmt.Errorf("tool_calls: %w", err)
	}
	if !null {
		m.ToolCalls = make([]ToolCall, e-s)
		for k := s; k < e; k++ {
			m.ToolCalls[k-s] = ToolCall{ID: d.tc.id.at(k), Name: d.tc.name.at(k), Arguments: d.tc.args.at(k), Requestor: d.tc.requestor.at(k)}
		}
	}
	return m, nil
}

func (d *callDec) decode(j int) (LLMCall, error) {
	c := LLMCall{
		PromptRef:     int(d.ref.at(j)),
		PromptShared:  int(d.shared.at(j)),
		ShapedReward:  d.shaped.at(j),
		LatencyMS:     d.latency.at(j),
		FinishReason:  d.finish.at(j),
		InvalidFormat: d.invalid.at(j),
	}
	s, e, _, err := d.prompt.span(j)
	if err != nil {
		return c, fmt.Errorf("prompt_tokens: %w", err)
	}
	c.PromptTokens = i32Slice(d.promptV, s, e)
	if s, e, _, err = d.completion.span(j); err != nil {
		return c, fmt.Errorf("completion_tokens: %w", err)
	}
	c.CompletionTokens = i32Slice(d.completionV, s, e)
	if s, e, _, err = d.logprob.span(j); err != nil {
		return c, fmt.Errorf("behavior_logprobs: %w", err)
	}
	c.BehaviorLogprobs = f32Slice(d.logprobV, s, e)
	if s, e, _, err = d.runs.span(j); err != nil {
		return c, fmt.Errorf("version_runs: %w", err)
	}
	if e > s {
		c.VersionRuns = make([]VersionRun, e-s)
		for k := s; k < e; k++ {
			c.VersionRuns[k-s] = VersionRun{Version: d.runVersion.at(k), Count: d.runCount.at(k)}
		}
	}
	var null bool
	if s, e, null, err = d.lossMask.span(j); err != nil {
		return c, fmt.Errorf("loss_mask: %w", err)
	}
	if !null {
		c.LossMask = make([]uint8, 0) // non-null, possibly empty: keep the distinction from nil
		if e > s {
			c.LossMask = d.lossMaskV[s:e:e]
		}
	}
	return c, nil
}

// decodeRecord converts one record batch into trajectories.
func decodeRecord(rec arrow.Record) ([]*Trajectory, error) {
	c := recordColumns(rec)
	var (
		id, taskID, domain, split, requestID, agentModel, userModel strCol
		termination, rewardInfo, status, errMsg                     strCol
		trial, invalidTurns                                         i32Col
		seed, pvStart                                               i64Col
		startedAt, endedAt                                          tsCol
		reward, shaped                                              f64Col
		err                                                         error
	)
	for _, s := range []struct {
		dst  *strCol
		name string
	}{
		{&id, ColID}, {&taskID, ColTaskID}, {&domain, ColDomain}, {&split, ColSplit},
		{&requestID, ColRequestID}, {&agentModel, ColAgentModel}, {&userModel, ColUserModel},
		{&termination, ColTermination}, {&rewardInfo, ColRewardInfoJSON}, {&status, ColStatus},
		{&errMsg, ColError},
	} {
		if *s.dst, err = c.str(s.name, requiredColumns[s.name]); err != nil {
			return nil, err
		}
	}
	if trial, err = c.i32(ColTrial, false); err != nil {
		return nil, err
	}
	if invalidTurns, err = c.i32(ColInvalidFormatTurns, false); err != nil {
		return nil, err
	}
	if seed, err = c.i64(ColSeed, false); err != nil {
		return nil, err
	}
	if pvStart, err = c.i64(ColPolicyVersionStart, false); err != nil {
		return nil, err
	}
	if startedAt, err = c.ts(ColStartedAt, false); err != nil {
		return nil, err
	}
	if endedAt, err = c.ts(ColEndedAt, false); err != nil {
		return nil, err
	}
	if reward, err = c.f64(ColReward, true); err != nil {
		return nil, err
	}
	if shaped, err = c.f64(ColShapedReward, false); err != nil {
		return nil, err
	}
	basis, basisV, err := c.listOf(ColRewardBasis, arrow.STRING, false)
	if err != nil {
		return nil, err
	}
	var basisS strCol
	if basisV != nil {
		basisS = strCol{basisV.(*array.String)}
	}
	var bdDB, bdEnv, bdAction, bdComm, bdNL f64Col
	if bd, err := c.get(ColBreakdown, arrow.STRUCT, false); err != nil {
		return nil, err
	} else if bd != nil {
		bc, err := structColumns(ColBreakdown, bd)
		if err != nil {
			return nil, err
		}
		for _, f := range []struct {
			dst  *f64Col
			name string
		}{{&bdDB, "db"}, {&bdEnv, "env_assertion"}, {&bdAction, "action"}, {&bdComm, "communicate"}, {&bdNL, "nl_assertion"}} {
			if *f.dst, err = bc.f64(f.name, false); err != nil {
				return nil, err
			}
		}
	}
	var tags listCol
	var tagK, tagV strCol
	if ta, err := c.get(ColTags, arrow.MAP, false); err != nil {
		return nil, err
	} else if ta != nil {
		m := ta.(*array.Map)
		mt := m.DataType().(*arrow.MapType)
		if mt.KeyType().ID() != arrow.STRING || mt.ItemType().ID() != arrow.STRING {
			return nil, fmt.Errorf("%w: column %q is %s, want map<utf8, utf8>", ErrCorrupt, ColTags, mt)
		}
		tags = listCol{l: m.List, nval: m.Keys().Len()}
		if m.Items().Len() != m.Keys().Len() {
			return nil, fmt.Errorf("%w: column %q has %d keys and %d items", ErrCorrupt, ColTags, m.Keys().Len(), m.Items().Len())
		}
		tagK, tagV = strCol{m.Keys().(*array.String)}, strCol{m.Items().(*array.String)}
	}
	msgs, mc, err := c.structList(ColMessages, true)
	if err != nil {
		return nil, err
	}
	md, err := newMessageDec(mc)
	if err != nil {
		return nil, err
	}
	calls, cc, err := c.structList(ColCalls, true)
	if err != nil {
		return nil, err
	}
	cd, err := newCallDec(cc)
	if err != nil {
		return nil, err
	}

	n := int(rec.NumRows())
	out := make([]*Trajectory, n)
	rows := make([]Trajectory, n)
	for i := 0; i < n; i++ {
		t := &rows[i]
		*t = Trajectory{
			ID:                 id.at(i),
			TaskID:             taskID.at(i),
			Domain:             domain.at(i),
			Split:              split.at(i),
			RequestID:          requestID.at(i),
			Trial:              int(trial.at(i)),
			Seed:               seed.at(i),
			StartedAt:          startedAt.at(i),
			EndedAt:            endedAt.at(i),
			PolicyVersionStart: pvStart.at(i),
			AgentModel:         agentModel.at(i),
			UserModel:          userModel.at(i),
			Termination:        termination.at(i),
			Reward:             reward.at(i),
			Breakdown: RewardBreakdown{
				DB: bdDB.opt(i), EnvAssertion: bdEnv.opt(i), Action: bdAction.opt(i),
				Communicate: bdComm.opt(i), NLAssertion: bdNL.opt(i),
			},
			RewardInfoJSON:     rewardInfo.at(i),
			ShapedReward:       shaped.at(i),
			InvalidFormatTurns: int(invalidTurns.at(i)),
			Status:             Status(status.at(i)),
			Error:              errMsg.at(i),
		}
		s, e, null, err := basis.span(i)
		if err != nil {
			return nil, fmt.Errorf("row %d: %s: %w", i, ColRewardBasis, err)
		}
		if !null {
			t.RewardBasis = make([]string, e-s)
			for k := s; k < e; k++ {
				t.RewardBasis[k-s] = basisS.at(k)
			}
		}
		if s, e, null, err = tags.span(i); err != nil {
			return nil, fmt.Errorf("row %d: %s: %w", i, ColTags, err)
		}
		if !null {
			t.Tags = make(map[string]string, e-s)
			for k := s; k < e; k++ {
				t.Tags[tagK.at(k)] = tagV.at(k)
			}
		}
		if s, e, _, err = msgs.span(i); err != nil {
			return nil, fmt.Errorf("row %d: %s: %w", i, ColMessages, err)
		}
		if e > s {
			t.Messages = make([]Message, e-s)
			for k := s; k < e; k++ {
				if t.Messages[k-s], err = md.decode(k); err != nil {
					return nil, fmt.Errorf("row %d message %d: %w", i, k-s, err)
				}
			}
		}
		if s, e, _, err = calls.span(i); err != nil {
			return nil, fmt.Errorf("row %d: %s: %w", i, ColCalls, err)
		}
		if e > s {
			t.Calls = make([]LLMCall, e-s)
			for k := s; k < e; k++ {
				if t.Calls[k-s], err = cd.decode(k); err != nil {
					return nil, fmt.Errorf("row %d call %d: %w", i, k-s, err)
				}
			}
		}
		out[i] = t
	}
	return out, nil
}
