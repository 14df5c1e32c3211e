package schemas

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// goAlloc backs every Arrow buffer with ordinary Go memory, so decoded slices and strings can alias
// the buffers safely (the garbage collector keeps them alive; nothing is ever freed early).
var goAlloc = memory.NewGoAllocator()

// encoder holds the typed column builders for one batch. Builders are created once and reused
// through encoderPool (NewRecord resets them), so encoding does no per-row reflection and no
// per-batch builder construction.
type encoder struct {
	rb *array.RecordBuilder

	id, taskID, domain, split, requestID     *array.StringBuilder
	trial                                    *array.Int32Builder
	seed, policyVersionStart                 *array.Int64Builder
	startedAt, endedAt                       *array.TimestampBuilder
	agentModel, userModel, termination       *array.StringBuilder
	reward, shapedReward                     *array.Float64Builder
	rewardBasis                              *array.ListBuilder
	rewardBasisV                             *array.StringBuilder
	breakdown                                *array.StructBuilder
	bdDB, bdEnv, bdAction, bdComm, bdNL      *array.Float64Builder
	rewardInfoJSON, status, errorMsg         *array.StringBuilder
	invalidFormatTurns                       *array.Int32Builder
	tags                                     *array.MapBuilder
	tagK, tagV                               *array.StringBuilder
	msgs                                     *array.ListBuilder
	msg                                      *array.StructBuilder
	mRole, mContent, mReasoning, mToolCallID *array.StringBuilder
	mRequestor                               *array.StringBuilder
	mToolCalls                               *array.ListBuilder
	tc                                       *array.StructBuilder
	tcID, tcName, tcArgs, tcRequestor        *array.StringBuilder
	mToolError                               *array.BooleanBuilder
	mTurn, mCallIndex                        *array.Int32Builder
	mTimestamp                               *array.TimestampBuilder
	calls                                    *array.ListBuilder
	call                                     *array.StructBuilder
	cRef, cShared                            *array.Int32Builder
	cPrompt, cCompletion, cLogprobs, cRuns   *array.ListBuilder
	cPromptV, cCompletionV                   *array.Int32Builder
	cLogprobsV                               *array.Float32Builder
	cRun                                     *array.StructBuilder
	cRunVersion                              *array.Int64Builder
	cRunCount                                *array.Int32Builder
	cLossMask                                *array.ListBuilder
	cLossMaskV                               *array.Uint8Builder
	cShaped, cLatency                        *array.Float64Builder
	cFinish                                  *array.StringBuilder
	cInvalid                                 *array.BooleanBuilder
	buf                                      bytes.Buffer
	ipcw                                     *ipc.Writer // writes into buf; see writeStream
	tagKeys                                  []string
}

var encoderPool = sync.Pool{New: func() any { return newEncoder(ArrowSchema) }}

func newEncoder(schema *arrow.Schema) *encoder {
	rb := array.NewRecordBuilder(goAlloc, schema)
	e := &encoder{rb: rb}
	str := func(i int) *array.StringBuilder { return rb.Field(i).(*array.StringBuilder) }
	e.id, e.taskID, e.domain, e.split, e.requestID = str(iID), str(iTaskID), str(iDomain), str(iSplit), str(iRequestID)
	e.trial = rb.Field(iTrial).(*array.Int32Builder)
	e.seed = rb.Field(iSeed).(*array.Int64Builder)
	e.startedAt = rb.Field(iStartedAt).(*array.TimestampBuilder)
	e.endedAt = rb.Field(iEndedAt).(*array.TimestampBuilder)
	e.policyVersionStart = rb.Field(iPolicyVersionStart).(*array.Int64Builder)
	e.agentModel, e.userModel, e.termination = str(iAgentModel), str(iUserModel), str(iTermination)
	e.reward = rb.Field(iReward).(*array.Float64Builder)
	e.rewardBasis = rb.Field(iRewardBasis).(*array.ListBuilder)
	e.rewardBasisV = e.rewardBasis.ValueBuilder().(*array.StringBuilder)
	e.breakdown = rb.Field(iBreakdown).(*array.StructBuilder)
	bd := func(i int) *array.Float64Builder { return e.breakdown.FieldBuilder(i).(*array.Float64Builder) }
	e.bdDB, e.bdEnv, e.bdAction, e.bdComm, e.bdNL = bd(0), bd(1), bd(2), bd(3), bd(4)
	e.rewardInfoJSON = str(iRewardInfoJSON)
	e.shapedReward = rb.Field(iShapedReward).(*array.Float64Builder)
	e.invalidFormatTurns = rb.Field(iInvalidFormatTurns).(*array.Int32Builder)
	e.status, e.errorMsg = str(iStatus), str(iError)
	e.tags = rb.Field(iTags).(*array.MapBuilder)
	e.tagK = e.tags.KeyBuilder().(*array.StringBuilder)
	e.tagV = e.tags.ItemBuilder().(*array.StringBuilder)

	e.msgs = rb.Field(iMessages).(*array.ListBuilder)
	e.msg = e.msgs.ValueBuilder().(*array.StructBuilder)
	ms := func(i int) *array.StringBuilder { return e.msg.FieldBuilder(i).(*array.StringBuilder) }
	e.mRole, e.mContent, e.mReasoning = ms(0), ms(1), ms(2)
	e.mToolCalls = e.msg.FieldBuilder(3).(*array.ListBuilder)
	e.tc = e.mToolCalls.ValueBuilder().(*array.StructBuilder)
	ts := func(i int) *array.StringBuilder { return e.tc.FieldBuilder(i).(*array.StringBuilder) }
	e.tcID, e.tcName, e.tcArgs, e.tcRequestor = ts(0), ts(1), ts(2), ts(3)
	e.mToolCallID, e.mRequestor = ms(4), ms(5)
	e.mToolError = e.msg.FieldBuilder(6).(*array.BooleanBuilder)
	e.mTurn = e.msg.FieldBuilder(7).(*array.Int32Builder)
	e.mTimestamp = e.msg.FieldBuilder(8).(*array.TimestampBuilder)
	e.mCallIndex = e.msg.FieldBuilder(9).(*array.Int32Builder)

	e.calls = rb.Field(iCalls).(*array.ListBuilder)
	e.call = e.calls.ValueBuilder().(*array.StructBuilder)
	e.cRef = e.call.FieldBuilder(0).(*array.Int32Builder)
	e.cShared = e.call.FieldBuilder(1).(*array.Int32Builder)
	e.cPrompt = e.call.FieldBuilder(2).(*array.ListBuilder)
	e.cPromptV = e.cPrompt.ValueBuilder().(*array.Int32Builder)
	e.cCompletion = e.call.FieldBuilder(3).(*array.ListBuilder)
	e.cCompletionV = e.cCompletion.ValueBuilder().(*array.Int32Builder)
	e.cLogprobs = e.call.FieldBuilder(4).(*array.ListBuilder)
	e.cLogprobsV = e.cLogprobs.ValueBuilder().(*array.Float32Builder)
	e.cRuns = e.call.FieldBuilder(5).(*array.ListBuilder)
	e.cRun = e.cRuns.ValueBuilder().(*array.StructBuilder)
	e.cRunVersion = e.cRun.FieldBuilder(0).(*array.Int64Builder)
	e.cRunCount = e.cRun.FieldBuilder(1).(*array.Int32Builder)
	e.cLossMask = e.call.FieldBuilder(6).(*array.ListBuilder)
	e.cLossMaskV = e.cLossMask.ValueBuilder().(*array.Uint8Builder)
	e.cShaped = e.call.FieldBuilder(7).(*array.Float64Builder)
	e.cFinish = e.call.FieldBuilder(8).(*array.StringBuilder)
	e.cInvalid = e.call.FieldBuilder(9).(*array.BooleanBuilder)
	e.cLatency = e.call.FieldBuilder(10).(*array.Float64Builder)
	return e
}

func appendTime(b *array.TimestampBuilder, t time.Time) {
	if t.IsZero() {
		b.AppendNull()
		return
	}
	b.Append(arrow.Timestamp(t.UnixMicro()))
}

func appendOptF64(b *array.Float64Builder, v *float64) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(*v)
}

// fitsInt32 reports whether v can be stored in an int32 column.
func fitsInt32(v int) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

// checkRanges verifies what the column types require (int32 ranges) before anything of the row is
// appended, so a rejected row never leaves the builders half-filled. Semantic checks belong to
// Validate.
func checkRanges(t *Trajectory) error {
	if !fitsInt32(t.Trial) || !fitsInt32(t.InvalidFormatTurns) {
		return fmt.Errorf("trajectory %s: trial %d or invalid_format_turns %d out of int32 range", t.ID, t.Trial, t.InvalidFormatTurns)
	}
	for i := range t.Messages {
		m := &t.Messages[i]
		if !fitsInt32(m.Turn) || !fitsInt32(m.CallIndex) {
			return fmt.Errorf("trajectory %s message %d: turn %d or call_index %d out of int32 range", t.ID, i, m.Turn, m.CallIndex)
		}
	}
	for i := range t.Calls {
		c := &t.Calls[i]
		if !fitsInt32(c.PromptRef) || !fitsInt32(c.PromptShared) {
			return fmt.Errorf("trajectory %s call %d: prompt_ref %d or prompt_shared %d out of int32 range", t.ID, i, c.PromptRef, c.PromptShared)
		}
	}
	return nil
}

// appendRow adds one trajectory; checkRanges must have accepted it.
func (e *encoder) appendRow(t *Trajectory) {
	e.id.Append(t.ID)
	e.taskID.Append(t.TaskID)
	e.domain.Append(t.Domain)
	e.split.Append(t.Split)
	e.requestID.Append(t.RequestID)
	e.trial.Append(int32(t.Trial))
	e.seed.Append(t.Seed)
	appendTime(e.startedAt, t.StartedAt)
	appendTime(e.endedAt, t.EndedAt)
	e.policyVersionStart.Append(t.PolicyVersionStart)
	e.agentModel.Append(t.AgentModel)
	e.userModel.Append(t.UserModel)

	e.msgs.Append(true)
	for i := range t.Messages {
		m := &t.Messages[i]
		e.msg.Append(true)
		e.mRole.Append(string(m.Role))
		e.mContent.Append(m.Content)
		e.mReasoning.Append(m.Reasoning)
		if m.ToolCalls == nil {
			e.mToolCalls.AppendNull()
		} else {
			e.mToolCalls.Append(true)
			for _, tc := range m.ToolCalls {
				e.tc.Append(true)
				e.tcID.Append(tc.ID)
				e.tcName.Append(tc.Name)
				e.tcArgs.Append(tc.Arguments)
				e.tcRequestor.Append(tc.Requestor)
			}
		}
		e.mToolCallID.Append(m.ToolCallID)
		e.mRequestor.Append(m.Requestor)
		e.mToolError.Append(m.ToolError)
		e.mTurn.Append(int32(m.Turn))
		appendTime(e.mTimestamp, m.Timestamp)
		e.mCallIndex.Append(int32(m.CallIndex))
	}

	e.termination.Append(t.Termination)
	e.reward.Append(t.Reward)
	if t.RewardBasis == nil {
		e.rewardBasis.AppendNull()
	} else {
		e.rewardBasis.Append(true)
		e.rewardBasisV.AppendValues(t.RewardBasis, nil)
	}
	e.breakdown.Append(true)
	appendOptF64(e.bdDB, t.Breakdown.DB)
	appendOptF64(e.bdEnv, t.Breakdown.EnvAssertion)
	appendOptF64(e.bdAction, t.Breakdown.Action)
	appendOptF64(e.bdComm, t.Breakdown.Communicate)
	appendOptF64(e.bdNL, t.Breakdown.NLAssertion)
	e.rewardInfoJSON.Append(t.RewardInfoJSON)
	e.shapedReward.Append(t.ShapedReward)
	e.invalidFormatTurns.Append(int32(t.InvalidFormatTurns))

	e.calls.Append(true)
	for i := range t.Calls {
		c := &t.Calls[i]
		e.call.Append(true)
		e.cRef.Append(int32(c.PromptRef))
		e.cShared.Append(int32(c.PromptShared))
		e.cPrompt.Append(true)
		e.cPromptV.AppendValues(c.PromptTokens, nil)
		e.cCompletion.Append(true)
		e.cCompletionV.AppendValues(c.CompletionTokens, nil)
		e.cLogprobs.Append(true)
		e.cLogprobsV.AppendValues(c.BehaviorLogprobs, nil)
		e.cRuns.Append(true)
		for _, r := range c.VersionRuns {
			e.cRun.Append(true)
			e.cRunVersion.Append(r.Version)
			e.cRunCount.Append(r.Count)
		}
		if c.LossMask == nil {
			e.cLossMask.AppendNull()
		} else {
			e.cLossMask.Append(true)
			e.cLossMaskV.AppendValues(c.LossMask, nil)
		}
		e.cShaped.Append(c.ShapedReward)
		e.cFinish.Append(c.FinishReason)
		e.cInvalid.Append(c.InvalidFormat)
		e.cLatency.Append(c.LatencyMS)
	}

	e.status.Append(string(t.Status))
	e.errorMsg.Append(t.Error)
	if t.Tags == nil {
		e.tags.AppendNull()
	} else {
		// Sorted keys make the encoding deterministic (golden files, content hashes).
		e.tagKeys = e.tagKeys[:0]
		for k := range t.Tags {
			e.tagKeys = append(e.tagKeys, k)
		}
		sort.Strings(e.tagKeys)
		e.tags.Append(true)
		for _, k := range e.tagKeys {
			e.tagK.Append(k)
			e.tagV.Append(t.Tags[k])
		}
	}
}

// reserve pre-sizes the leaf builders that dominate the batch (token lists) to avoid regrowth.
func (e *encoder) reserve(trajs []*Trajectory) {
	var prompt, completion, calls, msgs int
	for _, t := range trajs {
		if t == nil {
			continue
		}
		calls += len(t.Calls)
		msgs += len(t.Messages)
		for i := range t.Calls {
			prompt += len(t.Calls[i].PromptTokens)
			completion += len(t.Calls[i].CompletionTokens)
		}
	}
	e.cPromptV.Reserve(prompt)
	e.cCompletionV.Reserve(completion)
	e.cLogprobsV.Reserve(completion)
	e.call.Reserve(calls)
	e.msg.Reserve(msgs)
}

// NewRecord builds an Arrow record (one row per trajectory) with the current schema. The caller
// must Release it. Most callers want EncodeBatch; NewRecord is for in-process Arrow consumers.
func NewRecord(trajs []*Trajectory) (arrow.Record, error) {
	e := encoderPool.Get().(*encoder)
	rec, err := e.record(trajs)
	encoderPool.Put(e)
	return rec, err
}

func (e *encoder) record(trajs []*Trajectory) (arrow.Record, error) {
	e.reserve(trajs)
	for i, t := range trajs {
		if t == nil {
			return nil, fmt.Errorf("schemas: encode: trajectory %d is nil", i)
		}
		if err := checkRanges(t); err != nil {
			return nil, fmt.Errorf("schemas: encode: %w", err)
		}
	}
	for _, t := range trajs {
		e.appendRow(t)
	}
	return e.rb.NewRecord(), nil
}

// EncodeBatch encodes trajectories as an uncompressed Arrow IPC stream holding the schema (with
// SchemaVersion in its metadata) and one record batch. It is the value of a "scored trajectories"
// Kafka message. Compression is left to the transport (Kafka zstd), which keeps the stream readable
// by every Arrow implementation.
func EncodeBatch(trajs []*Trajectory) ([]byte, error) {
	e := encoderPool.Get().(*encoder)
	defer encoderPool.Put(e)
	rec, err := e.record(trajs)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	if err := e.writeStream(rec); err != nil {
		// The IPC writer's state is unknown after a failure: start a fresh one next time.
		e.ipcw = nil
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// schemaMessage is the encapsulated IPC schema message that starts every stream EncodeBatch
// writes. Building it (flatbuffers for ~60 nested fields) cost about as much as a small record, so
// it is built once; the bytes are what ipc.Writer emits for ArrowSchema.
var schemaMessage = sync.OnceValues(func() ([]byte, error) {
	var b bytes.Buffer
	w := ipc.NewWriter(&b, ipc.WithSchema(ArrowSchema), ipc.WithAllocator(goAlloc))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("schemas: encode: schema message: %w", err)
	}
	out := b.Bytes()
	if !bytes.HasSuffix(out, ipcEOS[:]) {
		return nil, fmt.Errorf("schemas: encode: schema-only stream does not end with the end-of-stream marker")
	}
	return bytes.Clone(out[:len(out)-len(ipcEOS)]), nil
})

// ipcEOS is the IPC stream's end-of-stream marker (continuation token, zero length).
var ipcEOS = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}

// writeStream writes schema message + rec + end-of-stream into e.buf: byte for byte what a fresh
// ipc.Writer writes, without re-serializing the schema. The encoder's ipc.Writer stays open
// across calls (so it emits only record messages after its first) and writes into e.buf, which is
// reset per call. The schema has no dictionary-encoded fields, so the writer carries no state from
// one record to the next.
func (e *encoder) writeStream(rec arrow.Record) error {
	schema, err := schemaMessage()
	if err != nil {
		return err
	}
	e.buf.Reset()
	if e.ipcw == nil {
		// A new writer emits the schema itself before its first record.
		e.ipcw = ipc.NewWriter(&e.buf, ipc.WithSchema(ArrowSchema), ipc.WithAllocator(goAlloc))
	} else {
		e.buf.Write(schema)
	}
	if err := e.ipcw.Write(rec); err != nil {
		return fmt.Errorf("schemas: encode: write record: %w", err)
	}
	if !bytes.HasPrefix(e.buf.Bytes(), schema) {
		return fmt.Errorf("schemas: encode: stream does not start with the cached schema message")
	}
	e.buf.Write(ipcEOS[:])
	return nil
}
