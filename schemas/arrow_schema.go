package schemas

import (
	"github.com/apache/arrow/go/v17/arrow"
)

// Arrow column names. They are also the Parquet column names and the DuckDB column names, so the
// three representations can be queried with the same SQL.
const (
	ColID                 = "id"
	ColTaskID             = "task_id"
	ColDomain             = "domain"
	ColSplit              = "split"
	ColRequestID          = "request_id"
	ColTrial              = "trial"
	ColSeed               = "seed"
	ColStartedAt          = "started_at"
	ColEndedAt            = "ended_at"
	ColPolicyVersionStart = "policy_version_start"
	ColAgentModel         = "agent_model"
	ColUserModel          = "user_model"
	ColMessages           = "messages"
	ColTermination        = "termination"
	ColReward             = "reward"
	ColRewardBasis        = "reward_basis"
	ColBreakdown          = "breakdown"
	ColRewardInfoJSON     = "reward_info_json"
	ColShapedReward       = "shaped_reward"
	ColInvalidFormatTurns = "invalid_format_turns"
	ColCalls              = "calls"
	ColStatus             = "status"
	ColError              = "error"
	ColTags               = "tags"
)

var (
	utf8T  = arrow.BinaryTypes.String
	i32T   = arrow.PrimitiveTypes.Int32
	i64T   = arrow.PrimitiveTypes.Int64
	f32T   = arrow.PrimitiveTypes.Float32
	f64T   = arrow.PrimitiveTypes.Float64
	u8T    = arrow.PrimitiveTypes.Uint8
	boolT  = arrow.FixedWidthTypes.Boolean
	tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
)

func fld(name string, t arrow.DataType, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: nullable}
}

// ArrowToolCallType is struct<id, name, arguments, requestor> (all utf8).
var ArrowToolCallType = arrow.StructOf(
	fld("id", utf8T, false),
	fld("name", utf8T, false),
	fld("arguments", utf8T, false),
	fld("requestor", utf8T, false),
)

// ArrowMessageType is the element type of the messages column.
var ArrowMessageType = arrow.StructOf(
	fld("role", utf8T, false),
	fld("content", utf8T, false),
	fld("reasoning", utf8T, false),
	fld("tool_calls", arrow.ListOfNonNullable(ArrowToolCallType), true),
	fld("tool_call_id", utf8T, false),
	fld("requestor", utf8T, false),
	fld("tool_error", boolT, false),
	fld("turn", i32T, false),
	fld("timestamp", tsType, true),
	fld("call_index", i32T, false),
)

// ArrowVersionRunType is struct<version int64, count int32>.
var ArrowVersionRunType = arrow.StructOf(
	fld("version", i64T, false),
	fld("count", i32T, false),
)

// ArrowCallType is the element type of the calls column.
var ArrowCallType = arrow.StructOf(
	fld("prompt_ref", i32T, false),
	fld("prompt_shared", i32T, false),
	fld("prompt_tokens", arrow.ListOfNonNullable(i32T), false),
	fld("completion_tokens", arrow.ListOfNonNullable(i32T), false),
	fld("behavior_logprobs", arrow.ListOfNonNullable(f32T), false),
	fld("version_runs", arrow.ListOfNonNullable(ArrowVersionRunType), false),
	fld("loss_mask", arrow.ListOfNonNullable(u8T), true),
	fld("shaped_reward", f64T, false),
	fld("finish_reason", utf8T, false),
	fld("invalid_format", boolT, false),
	fld("latency_ms", f64T, false),
)

// ArrowBreakdownType is τ²'s reward_breakdown; a null child means "not in the basis".
var ArrowBreakdownType = arrow.StructOf(
	fld("db", f64T, true),
	fld("env_assertion", f64T, true),
	fld("action", f64T, true),
	fld("communicate", f64T, true),
	fld("nl_assertion", f64T, true),
)

// arrowFields lists the top-level columns in order.
var arrowFields = []arrow.Field{
	fld(ColID, utf8T, false),
	fld(ColTaskID, utf8T, false),
	fld(ColDomain, utf8T, false),
	fld(ColSplit, utf8T, false),
	fld(ColRequestID, utf8T, false),
	fld(ColTrial, i32T, false),
	fld(ColSeed, i64T, false),
	fld(ColStartedAt, tsType, true),
	fld(ColEndedAt, tsType, true),
	fld(ColPolicyVersionStart, i64T, false),
	fld(ColAgentModel, utf8T, false),
	fld(ColUserModel, utf8T, false),
	fld(ColMessages, arrow.ListOfNonNullable(ArrowMessageType), false),
	fld(ColTermination, utf8T, false),
	fld(ColReward, f64T, false),
	fld(ColRewardBasis, arrow.ListOfNonNullable(utf8T), true),
	fld(ColBreakdown, ArrowBreakdownType, false),
	fld(ColRewardInfoJSON, utf8T, false),
	fld(ColShapedReward, f64T, false),
	fld(ColInvalidFormatTurns, i32T, false),
	fld(ColCalls, arrow.ListOfNonNullable(ArrowCallType), false),
	fld(ColStatus, utf8T, false),
	fld(ColError, utf8T, false),
	fld(ColTags, arrow.MapOf(utf8T, utf8T), true),
}

// Column indexes into arrowFields, used by the encoder.
const (
	iID = iota
	iTaskID
	iDomain
	iSplit
	iRequestID
	iTrial
	iSeed
	iStartedAt
	iEndedAt
	iPolicyVersionStart
	iAgentModel
	iUserModel
	iMessages
	iTermination
	iReward
	iRewardBasis
	iBreakdown
	iRewardInfoJSON
	iShapedReward
	iInvalidFormatTurns
	iCalls
	iStatus
	iError
	iTags
	numColumns
)

// ArrowSchema is the Arrow schema of a trajectory batch, with SchemaVersion in its metadata under
// MetadataKeyVersion.
var ArrowSchema = newArrowSchema(SchemaVersion)

func newArrowSchema(version string) *arrow.Schema {
	md := arrow.NewMetadata([]string{MetadataKeyVersion}, []string{version})
	return arrow.NewSchema(arrowFields, &md)
}

// requiredColumns must be present in every 1.x batch; all other known columns are optional and
// decode as zero values when absent (so a minor version may add columns freely).
var requiredColumns = map[string]bool{
	ColID: true, ColTaskID: true, ColDomain: true, ColSplit: true, ColStatus: true,
	ColReward: true, ColMessages: true, ColCalls: true,
}
