package evaluator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"tau2rl/lib/inference/llm"
	"tau2rl/tau2/data"
	"tau2rl/tau2/pyjson"
)

// Judge is the LLM behind NL assertions: one chat completion with a system
// and a user message, returning the reply's text. Any OpenAI-compatible
// endpoint will do (ChatJudge adapts lib/inference/llm's client). An error
// aborts the evaluation (never a reward).
type Judge interface {
	Complete(ctx context.Context, system, user string) (string, error)
}

// JudgeSystemPrompt is τ²'s NL-assertion judge system prompt, verbatim
// (evaluator_nl_assertions.py, including its indentation).
const JudgeSystemPrompt = `
        TASK
        - You will be given a list of expected outcomes and a conversation that was collected during a test case run.
        - The conversation is between an agent and a customer.
        - Your job is to evaluate whether the agent satisfies each of the expected outcomes.
        - Grade each expected outcome individually.

        FORMAT
        - Your response should be a JSON object with the following fields:
        - ` + "`reasoning`" + `: a short explanation for your classification
        - ` + "`metExpectation`" + `: ` + "`true`" + ` if the agent satisfies the expected outcomes, ` + "`false`" + ` otherwise
        - ` + "`expectedOutcome`" + `: repeat the expectation from the input that you are grading
        
        Example response structure:
        {
            "results": [
                {
                    "expectedOutcome": "<one of the expected outcomes from the input>",
                    "reasoning": "<reasoning trace>",
                    "metExpectation": <false or true>,
                }
            ]
        }
        `

// DefaultJudgeModel is τ²'s DEFAULT_LLM_NL_ASSERTIONS (temperature 0).
const DefaultJudgeModel = "gpt-4.1-2025-04-14"

// JudgeUserPrompt renders τ²'s judge user prompt: the trajectory as
// "role: content" lines (every message, content None as "None") and the
// Python repr of the assertion list.
func JudgeUserPrompt(trajectory []Message, assertions []string) (string, error) {
	var b strings.Builder
	for i := range trajectory {
		m := &trajectory[i]
		if m.ToolMessages != nil {
			return "", evalErr("'MultiToolMessage' object has no attribute 'content'")
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(m.Role)
		b.WriteString(": ")
		if m.Content == nil {
			b.WriteString("None")
		} else {
			b.WriteString(*m.Content)
		}
	}
	return "\n        conversation:\n        " + b.String() +
		"\n        \n        expectedOutcomes:\n        " + pyReprStrList(assertions) + "\n        ", nil
}

// nlCheck is τ²'s NLAssertionsEvaluator.calculate_reward.
func nlCheck(ctx context.Context, j Judge, crit *data.EvaluationCriteria, trajectory []Message) (*part, error) {
	if len(crit.NLAssertions) == 0 {
		return &part{reward: 1, nlAssertions: []NLAssertionCheck{}, info: note("No nl_assertions to evaluate"),
			breakdown: []Component{{data.RewardNLAssertion, 1}}}, nil
	}
	user, err := JudgeUserPrompt(trajectory, crit.NLAssertions)
	if err != nil {
		return nil, err
	}
	reply, err := j.Complete(ctx, JudgeSystemPrompt, user)
	if err != nil {
		return nil, fmt.Errorf("evaluator: NL judge: %w", err)
	}
	checks, err := ParseJudgeReply(reply)
	if err != nil {
		return nil, err
	}
	all := true
	for _, c := range checks {
		all = all && c.Met
	}
	r := boolReward(all)
	return &part{reward: r, nlAssertions: checks, breakdown: []Component{{data.RewardNLAssertion, r}}}, nil
}

// ParseJudgeReply decodes a judge reply as τ² does: json.loads of the
// whole text (no code fences stripped), then
// result_data.get("results", []) and, per result, expectedOutcome,
// metExpectation and reasoning (pydantic-validated). Anything τ² would
// raise on is an error wrapping ErrEvaluation. An empty result list gives
// no checks (reward 1, as in τ²).
func ParseJudgeReply(reply string) ([]NLAssertionCheck, error) {
	v, err := pyjson.Loads(reply)
	if err != nil {
		return nil, evalErr("NL judge reply is not JSON: %v", err)
	}
	o, ok := v.(*pyjson.Object)
	if !ok {
		return nil, evalErr("NL judge reply: '%s' object has no attribute 'get'", pyjson.TypeName(v))
	}
	rv, ok := o.Get("results")
	if !ok {
		return []NLAssertionCheck{}, nil
	}
	var items []any
	switch x := rv.(type) {
	case []any:
		items = x
	case *pyjson.Object:
		if x.Len() > 0 {
			return nil, evalErr("NL judge reply: results is a dict")
		}
	case string:
		if x != "" {
			return nil, evalErr("NL judge reply: results is a string")
		}
	default:
		return nil, evalErr("NL judge reply: '%s' object is not iterable", pyjson.TypeName(rv))
	}
	out := make([]NLAssertionCheck, 0, len(items))
	for i, it := range items {
		ro, ok := it.(*pyjson.Object)
		if !ok {
			return nil, evalErr("NL judge reply: results[%d] is %s, not a dict", i, pyjson.TypeName(it))
		}
		outcome, err := reqStr(ro, "expectedOutcome")
		if err != nil {
			return nil, evalErr("NL judge reply: results[%d]: %v", i, err)
		}
		mv, ok := ro.Get("metExpectation")
		if !ok {
			return nil, evalErr("NL judge reply: results[%d]: metExpectation: field required", i)
		}
		met, ok := pyjson.LaxBool(mv)
		if !ok {
			return nil, evalErr("NL judge reply: results[%d]: metExpectation: not a valid boolean: %s", i, pyjson.Repr(mv))
		}
		reasoning, err := reqStr(ro, "reasoning")
		if err != nil {
			return nil, evalErr("NL judge reply: results[%d]: %v", i, err)
		}
		out = append(out, NLAssertionCheck{NLAssertion: outcome, Met: met, Justification: reasoning})
	}
	return out, nil
}

// ChatJudge is a Judge on lib/inference/llm's OpenAI-compatible chat client
// (retries, timeouts, metrics), with τ²'s settings: the given model at
// temperature 0, no JSON mode.
type ChatJudge struct {
	Chat  *llm.Chat
	Model string
}

// NewChatJudge builds a ChatJudge from a chat config; an empty model means
// the config's model, else DefaultJudgeModel.
func NewChatJudge(cfg llm.ChatConfig, m *llm.Metrics) (*ChatJudge, error) {
	c, err := llm.NewChat(cfg, m)
	if err != nil {
		return nil, fmt.Errorf("evaluator: NL judge: %w", err)
	}
	model := cfg.Model
	if model == "" {
		model = DefaultJudgeModel
	}
	return &ChatJudge{Chat: c, Model: model}, nil
}

// Complete implements Judge.
func (j *ChatJudge) Complete(ctx context.Context, system, user string) (string, error) {
	zero := float32(0)
	res, err := j.Chat.Complete(ctx, llm.ChatRequest{
		ChatCompletionRequest: openai.ChatCompletionRequest{
			Model: j.Model,
			Messages: []openai.ChatCompletionMessage{
				{Role: openai.ChatMessageRoleSystem, Content: system},
				{Role: openai.ChatMessageRoleUser, Content: user},
			},
		},
		Temperature: &zero,
	})
	if err != nil {
		return "", err
	}
	msg := res.Choices[0].Message
	if msg.Content == "" && len(msg.ToolCalls) > 0 {
		return "", errors.New("judge answered with tool calls instead of text")
	}
	return msg.Content, nil
}
