// Package scripted is a SCRIPTED stand-in for the policy and the user
// simulator, for tests, benchmarks and `make run` without a GPU: an
// llmtest.Script that plays a τ² task's gold actions as the agent and the
// task's scenario as the user, behind lib/inference/llmtest's real
// OpenAI-compatible HTTP server (chat completions with tools, SGLang
// /generate and vLLM /v1/completions in token mode).
//
// Nothing here is a model: the agent's replies come from the task's
// evaluation criteria, so its episodes are only as good as the gold data and
// the injected errors make them. Logs and metrics of the binaries that use it
// say "scripted".
//
// # How a call is attributed to a task
//
// The producer tags every LLM request with episode.Tag (SGLang "rid", vLLM
// "request_id", the chat "user" field), which names the domain and task id.
// The script reads the tag from the request body; a request without a tag is
// answered with an error.
//
// # The agent
//
// Its plan is built from the task: each gold action in order — a tool call
// for the agent's own actions, or, for actions the user must perform on
// their device (requestor "user", telecom), a message "Please perform this
// action on your device: NAME {json args}" — then, when the task lists
// communicate_info, one message containing every item, then "Is there
// anything else I can help you with?". A transfer_to_human_agents action
// that is the task's last gold action is followed by τ²'s transfer
// announcement instead, which ends the episode; a transfer followed by more
// gold actions (banking_knowledge's task_005: the customer comes back from
// the human agent) is just a tool call, and the plan goes on. In solo mode
// every action is a tool call and the plan ends with done(). The agent is
// stateless: the position in the plan is the number of agent turns already
// in the conversation, the greeting excluded — or, for a task that resumes
// a message_history (τ² starts such an episode from the history, without
// the greeting), the history's assistant turns excluded.
//
// # Searching before acting
//
// A task that names required_documents (banking_knowledge) is one where a
// real agent must look the bank's procedure up before acting, so the plan
// starts with one retrieval call through the first retrieval tool the
// request offers, about the task's first required document (its title, read
// from the domain's documents/; the id if the title is missing):
//   - KB_search (bm25, openai_embeddings and their _grep variants):
//     {"query": TITLE};
//   - grep (grep_only): {"pattern": W1|W2|…}, the title's words of four or
//     more letters ("Internal" left out) as an alternation, since titles
//     rarely occur verbatim in a document's content, which grep searches;
//   - shell (terminal_use): {"command": "rg -il 'W1|W2|…' . | head -n 10"}.
//
// With no retrieval tool offered (no_knowledge, full_kb, golden_retrieval:
// the documents are in the prompt or absent) there is no lookup. Lookups
// are reads: the errors below never pick them as the state-changing action.
//
// With probability error_rate an episode gets one error, chosen from
// error_kinds by a hash of the episode id (so a run is reproducible):
//   - wrong_argument: one state-changing action's (the agent's call or the
//     device action it asks for) first string argument gets "-x" appended
//     (a number argument +1);
//   - skipped_write: one state-changing action is left out;
//   - malformed_call: an extra turn with a <tool_call> whose JSON is cut
//     short is inserted before a tool call (an invalid-format turn; the plan
//     then goes on, so the episode can still succeed, minus the penalty).
//
// When the task has no state-changing action, wrong_argument and
// skipped_write leave out the communicate_info message instead (if any).
//
// # The user
//
// It opens with the scenario's reason for call and known information (or
// its free-text instructions, τ²'s stop tokens removed), performs a requested device action by calling that tool, reports a tool
// result in words, answers the transfer announcement with ###TRANSFER###
// and the closing question with ###STOP###, and otherwise says "Okay,
// please go ahead." — ending with ###STOP### after max_user_turns. In a
// resumed episode the history's user messages are not its own turns: its
// first turn after the history (unless it reports a tool result) is the
// opening.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/knowledge"
	"tau2rl/tau2/pyjson"
)

// Error kinds.
const (
	ErrWrongArgument = "wrong_argument"
	ErrSkippedWrite  = "skipped_write"
	ErrMalformedCall = "malformed_call"
)

// Fixed phrases of the scripted conversation.
const (
	InstructPrefix = "Please perform this action on your device: "
	ClosingText    = "Is there anything else I can help you with?"
	TransferText   = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
	InfoPrefix     = "Here is the information you asked for: "
	GoAheadText    = "Okay, please go ahead."
	ThanksText     = "No, that's all. Thank you! " + episode.StopToken
)

// Config configures the scripted behaviours.
type Config struct {
	// DataDir is the τ² data directory ("" = TAU2_DATA_DIR or
	// ../shared/tau2-data).
	DataDir string `yaml:"data_dir"`
	// ErrorRate is the probability that an episode gets one agent error.
	// Default 0.3.
	ErrorRate float64 `yaml:"error_rate"`
	// ErrorKinds are the errors to choose from. Default wrong_argument,
	// skipped_write, malformed_call.
	ErrorKinds []string `yaml:"error_kinds"`
	// Seed varies the error choices between runs. Default 1.
	Seed uint64 `yaml:"seed"`
	// MaxUserTurns ends the conversation from the user's side. Default 30.
	MaxUserTurns int `yaml:"max_user_turns"`
	// Reasoning makes the agent write a short thinking block before each
	// turn (token mode with thinking on). Default true.
	Reasoning bool `yaml:"reasoning"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{ErrorRate: 0.3, ErrorKinds: []string{ErrWrongArgument, ErrSkippedWrite, ErrMalformedCall}, Seed: 1, MaxUserTurns: 30, Reasoning: true}
}

// Validate reports configuration errors.
func (c *Config) Validate() error {
	if c.ErrorRate < 0 || c.ErrorRate > 1 {
		return fmt.Errorf("scripted: error_rate %v must be in [0, 1]", c.ErrorRate)
	}
	if c.ErrorRate > 0 && len(c.ErrorKinds) == 0 {
		return errors.New("scripted: error_kinds: at least one kind when error_rate > 0")
	}
	for _, k := range c.ErrorKinds {
		switch k {
		case ErrWrongArgument, ErrSkippedWrite, ErrMalformedCall:
		default:
			return fmt.Errorf("scripted: error_kinds: unknown kind %q", k)
		}
	}
	if c.MaxUserTurns < 1 {
		return fmt.Errorf("scripted: max_user_turns %d must be ≥ 1", c.MaxUserTurns)
	}
	return nil
}

// Script is the scripted agent and user; it implements llmtest.Script and is
// safe for concurrent use.
type Script struct {
	cfg Config
}

// New returns the script.
func New(cfg Config) (*Script, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := data.Dir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return &Script{cfg: cfg}, nil
}

var _ llmtest.Script = (*Script)(nil)

// Reply implements llmtest.Script.
func (s *Script) Reply(ctx context.Context, call *llmtest.Call) (llmtest.Reply, error) {
	tag, err := tagOf(call)
	if err != nil {
		return llmtest.Reply{}, err
	}
	set, err := episode.LoadTasks(s.cfg.DataDir, tag.Domain, "")
	if err != nil {
		return llmtest.Reply{}, fmt.Errorf("scripted: %w", err)
	}
	task, ok := set.Get(tag.TaskID)
	if !ok {
		return llmtest.Reply{}, fmt.Errorf("scripted: domain %s has no task %q", tag.Domain, tag.TaskID)
	}
	if len(call.Messages) == 0 || call.Messages[0].Role != chattemplate.RoleSystem {
		return llmtest.Reply{}, errors.New("scripted: the conversation has no system prompt")
	}
	sys := call.Messages[0].Content
	switch {
	case strings.HasPrefix(sys, "<instructions>\nYou are a customer service agent"):
		solo := strings.Contains(sys, "\n<ticket>\n")
		return s.agent(tag, task, call.Messages[1:], solo, call.ToolNames())
	case strings.Contains(sys, "\n<scenario>\n"):
		return s.user(task, call.Messages[1:])
	}
	return llmtest.Reply{}, errors.New("scripted: the system prompt is neither τ²'s agent nor its user simulator prompt")
}

// tagOf reads the episode tag from the request body.
func tagOf(call *llmtest.Call) (episode.Tag, error) {
	var body struct {
		Rid       string `json:"rid"`
		RequestID string `json:"request_id"`
		User      string `json:"user"`
	}
	if err := json.Unmarshal(call.Body, &body); err != nil {
		return episode.Tag{}, fmt.Errorf("scripted: request body: %w", err)
	}
	for _, s := range []string{body.Rid, body.RequestID, body.User} {
		if s != "" {
			return episode.ParseTag(s)
		}
	}
	return episode.Tag{}, errors.New("scripted: the request carries no tau2rl episode tag (rid, request_id or user)")
}

type stepKind int

const (
	stepCall     stepKind = iota // the agent calls a tool
	stepInstruct                 // the agent asks the user to call a device tool
	stepSay                      // the agent says text
	stepInfo                     // the agent says the communicate_info
	stepRaw                      // the agent writes raw (malformed) text
	stepLookup                   // the agent calls a retrieval tool (not a gold action)
)

type step struct {
	kind stepKind
	name string
	args string // JSON object text
	text string
}

// action reports whether the step performs a gold action (its own call or
// the user's).
func (st step) action() bool { return st.kind == stepCall || st.kind == stepInstruct }

// plan returns the scripted agent's turns for an episode. tools are the
// names of the tools the request offers (they choose the lookup tool).
func (s *Script) plan(domain string, task *data.Task, episodeID string, solo bool, tools []string) ([]step, error) {
	var actions []data.Action
	var info []string
	if c := task.EvaluationCriteria; c != nil {
		actions, info = c.Actions, c.CommunicateInfo
	}
	steps, err := s.lookups(domain, task, tools)
	if err != nil {
		return nil, err
	}
	transfer := false
	for i, a := range actions {
		args := "{}"
		if a.Arguments != nil {
			var err error
			if args, err = pyjson.Dumps(a.Arguments); err != nil {
				return nil, fmt.Errorf("scripted: task %s action %s: %w", task.ID, a.Name, err)
			}
		}
		if a.Requestor == "user" && !solo {
			steps = append(steps, step{kind: stepInstruct, name: a.Name, args: args})
			continue
		}
		steps = append(steps, step{kind: stepCall, name: a.Name, args: args})
		if a.Name == "transfer_to_human_agents" && !solo && i == len(actions)-1 {
			steps = append(steps, step{kind: stepSay, text: TransferText})
			transfer = true
			break
		}
	}
	if !solo && !transfer && len(info) > 0 {
		steps = append(steps, step{kind: stepInfo, text: InfoPrefix + strings.Join(info, ", ") + "."})
	}
	steps = s.injectError(domain, episodeID, steps, solo)
	if solo {
		return append(steps, step{kind: stepCall, name: episode.DoneTool, args: "{}"}), nil
	}
	if !transfer {
		steps = append(steps, step{kind: stepSay, text: ClosingText})
	}
	return steps, nil
}

func (s *Script) hash(episodeID, salt string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s", s.cfg.Seed, episodeID, salt)
	return h.Sum64()
}

// injectError applies at most one error to the plan (see the package doc).
func (s *Script) injectError(domain, episodeID string, steps []step, solo bool) []step {
	if s.cfg.ErrorRate <= 0 || float64(s.hash(episodeID, "rate")%1_000_000)/1_000_000 >= s.cfg.ErrorRate {
		return steps
	}
	var calls, writes []int
	info := -1
	var e *env.Environment
	if en, err := env.New(domain, env.Options{DataDir: s.cfg.DataDir, Solo: solo}); err == nil {
		e = en
	}
	for i, st := range steps {
		if st.kind == stepInfo {
			info = i
		}
		if st.kind == stepLookup {
			calls = append(calls, i) // a call that can be malformed, never a write
		}
		if !st.action() {
			continue
		}
		calls = append(calls, i)
		if e == nil || e.IsMutating(st.name) {
			writes = append(writes, i)
		}
	}
	pick := func(idx []int) int { return idx[s.hash(episodeID, "pos")%uint64(len(idx))] }
	kind := s.cfg.ErrorKinds[s.hash(episodeID, "kind")%uint64(len(s.cfg.ErrorKinds))]
	if kind != ErrMalformedCall && len(writes) == 0 && info >= 0 {
		// Nothing state-changing to get wrong: the agent forgets to tell
		// the user what it found instead.
		return append(steps[:info:info], steps[info+1:]...)
	}
	switch {
	case kind == ErrWrongArgument && len(writes) > 0:
		i := pick(writes)
		if args, ok := perturb(steps[i].args); ok {
			steps[i].args = args
			return steps
		}
	case kind == ErrSkippedWrite && len(writes) > 0:
		i := pick(writes)
		return append(steps[:i:i], steps[i+1:]...)
	}
	// malformed_call, or the chosen kind had nothing to act on.
	at, name := 0, "transfer_to_human_agents"
	if len(calls) > 0 && (steps[pick(calls)].kind == stepCall || steps[pick(calls)].kind == stepLookup) {
		at = pick(calls)
		name = steps[at].name
	}
	bad := step{kind: stepRaw, text: chattemplate.ToolCallOpen + "\n{\"name\": \"" + name + "\", \"arguments\": {\n" + chattemplate.ToolCallClose}
	out := append(append(append([]step{}, steps[:at]...), bad), steps[at:]...)
	return out
}

// perturb changes the first string argument (appending "-x") or else the
// first number (+1) of a JSON object.
func perturb(args string) (string, bool) {
	v, err := pyjson.Loads(args)
	if err != nil {
		return "", false
	}
	o, ok := v.(*pyjson.Object)
	if !ok {
		return "", false
	}
	changed := false
	for _, k := range o.Keys() {
		x, _ := o.Get(k)
		switch t := x.(type) {
		case string:
			o.Set(k, t+"-x")
			changed = true
		case int64:
			o.Set(k, t+1)
			changed = true
		case float64:
			o.Set(k, t+1)
			changed = true
		}
		if changed {
			break
		}
	}
	if !changed {
		return "", false
	}
	out, err := pyjson.Dumps(o)
	return out, err == nil
}

func (s *Script) agent(tag episode.Tag, task *data.Task, msgs []chattemplate.Message, solo bool, tools []string) (llmtest.Reply, error) {
	plan, err := s.plan(tag.Domain, task, tag.Episode, solo, tools)
	if err != nil {
		return llmtest.Reply{}, err
	}
	done := 0
	for _, m := range msgs {
		if m.Role == chattemplate.RoleAssistant {
			done++
		}
	}
	switch hist := historyCount(task, chattemplate.RoleAssistant); {
	case hasHistory(task):
		done -= hist // the resumed conversation's turns
	case !solo:
		done-- // the greeting
	}
	if done < 0 {
		return llmtest.Reply{}, errors.New("scripted: agent conversation lacks the greeting or the task's message history")
	}
	if done >= len(plan) {
		if solo {
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: episode.DoneTool, Arguments: json.RawMessage("{}")}}}, nil
		}
		return llmtest.Reply{Content: ClosingText}, nil
	}
	st := plan[done]
	var r llmtest.Reply
	switch st.kind {
	case stepCall:
		r.ToolCalls = []llmtest.ToolCall{{Name: st.name, Arguments: json.RawMessage(st.args)}}
		if s.cfg.Reasoning {
			r.Reasoning = "The next step of the resolution is " + st.name + "."
		}
	case stepLookup:
		r.ToolCalls = []llmtest.ToolCall{{Name: st.name, Arguments: json.RawMessage(st.args)}}
		if s.cfg.Reasoning {
			r.Reasoning = "I should look up the bank's procedure before acting."
		}
	case stepInstruct:
		r.Content = InstructPrefix + st.name + " " + st.args
	case stepSay, stepInfo:
		r.Content = st.text
		if s.cfg.Reasoning {
			r.Reasoning = "I should tell the customer."
		}
	case stepRaw:
		r.Raw = st.text
	}
	return r, nil
}

var instructRE = regexp.MustCompile(regexp.QuoteMeta(InstructPrefix) + `(\S+) (\{.*\})`)

func (s *Script) user(task *data.Task, msgs []chattemplate.Message) (llmtest.Reply, error) {
	if len(msgs) == 0 {
		return llmtest.Reply{}, errors.New("scripted: user conversation is empty")
	}
	// The user's own turns are "assistant" in its role-flipped view; a
	// resumed history's user messages are not among them.
	turns := -historyCount(task, chattemplate.RoleUser)
	for _, m := range msgs {
		if m.Role == chattemplate.RoleAssistant {
			turns++
		}
	}
	if turns < 0 {
		return llmtest.Reply{}, errors.New("scripted: user conversation lacks the task's message history")
	}
	last := msgs[len(msgs)-1]
	if turns == 0 && last.Role != chattemplate.RoleTool {
		return llmtest.Reply{Content: Opening(task)}, nil
	}
	if turns >= s.cfg.MaxUserTurns {
		return llmtest.Reply{Content: ThanksText}, nil
	}
	if last.Role == chattemplate.RoleTool {
		res := last.Content
		if len(res) > 300 {
			res = res[:300] + "…"
		}
		return llmtest.Reply{Content: "I did that. This is what I see: " + res}, nil
	}
	text := last.Content
	switch {
	case strings.Contains(text, "TRANSFERRED TO A HUMAN AGENT"):
		return llmtest.Reply{Content: episode.TransferToken}, nil
	case strings.Contains(text, InstructPrefix):
		m := instructRE.FindStringSubmatch(text)
		if m == nil || !json.Valid([]byte(m[2])) {
			return llmtest.Reply{Content: "Sorry, I did not understand which action to perform."}, nil
		}
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: m[1], Arguments: json.RawMessage(m[2])}}}, nil
	case strings.Contains(strings.ToLower(text), "anything else i can help you with"):
		return llmtest.Reply{Content: ThanksText}, nil
	}
	return llmtest.Reply{Content: GoAheadText}, nil
}

// Opening is the scripted user's first message: the scenario's reason for
// call and known information (or its free-text instructions), without τ²'s
// stop tokens. Free-text instructions often tell the simulator when to
// write ###STOP### or ###TRANSFER### (45 of banking_knowledge's 97 tasks);
// quoted verbatim, the opening would end the episode at once.
func Opening(task *data.Task) string {
	in := task.UserScenario.Instructions
	if in.Structured == nil {
		return stripStopTokens(strings.TrimSpace(in.Text))
	}
	parts := []string{strings.TrimSpace(in.Structured.ReasonForCall)}
	if in.Structured.KnownInfo != nil {
		parts = append(parts, strings.TrimSpace(*in.Structured.KnownInfo))
	}
	return stripStopTokens(strings.Join(parts, " "))
}

// stripStopTokens removes every τ² stop token from text.
func stripStopTokens(text string) string {
	for _, t := range episode.StopTokens {
		text = strings.ReplaceAll(text, t, "")
	}
	return text
}

// hasHistory reports whether the task resumes a message_history.
func hasHistory(task *data.Task) bool {
	return task.InitialState != nil && len(task.InitialState.MessageHistory) > 0
}

// historyCount counts the messages of role in the task's message_history.
func historyCount(task *data.Task, role string) int {
	if !hasHistory(task) {
		return 0
	}
	n := 0
	for _, m := range task.InitialState.MessageHistory {
		if m == nil {
			continue
		}
		if r, _ := m.Get("role"); r == role {
			n++
		}
	}
	return n
}

// Lookup tools, in order of preference (see the package doc).
const (
	lookupKBSearch = "KB_search"
	lookupGrep     = "grep"
	lookupShell    = "shell"
)

// lookups returns the retrieval step that opens the plan of a task with
// required documents, through the first lookup tool offered; none when the
// task names no document or no lookup tool is offered.
func (s *Script) lookups(domain string, task *data.Task, tools []string) ([]step, error) {
	if len(task.RequiredDocuments) == 0 {
		return nil, nil
	}
	tool := ""
	for _, t := range []string{lookupKBSearch, lookupGrep, lookupShell} {
		if slices.Contains(tools, t) {
			tool = t
			break
		}
	}
	if tool == "" {
		return nil, nil
	}
	titles, err := s.titles(domain)
	if err != nil {
		return nil, err
	}
	ref := task.RequiredDocuments[0]
	title := titles[ref]
	if title == "" {
		title = ref
	}
	var args *pyjson.Object
	switch tool {
	case lookupKBSearch:
		args = pyjson.NewObject("query", title)
	case lookupGrep:
		args = pyjson.NewObject("pattern", grepPattern(title))
	case lookupShell:
		args = pyjson.NewObject("command", "rg -il '"+grepPattern(title)+"' . | head -n 10")
	}
	text, err := pyjson.Dumps(args)
	if err != nil {
		return nil, fmt.Errorf("scripted: task %s lookup: %w", task.ID, err)
	}
	return []step{{kind: stepLookup, name: tool, args: text}}, nil
}

var wordRE = regexp.MustCompile(`[A-Za-z0-9]{4,}`)

// grepPattern is the alternation of a title's words of four or more
// letters, "Internal" (a marker of staff-only documents, not a topic) left
// out; the title quoted as a literal when it has no such word. The words
// are letters and digits only, so the pattern is safe inside the shell
// command's single quotes.
func grepPattern(title string) string {
	var words []string
	for _, w := range wordRE.FindAllString(title, -1) {
		if w != "Internal" && !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return regexp.QuoteMeta(title)
	}
	return strings.Join(words, "|")
}

// titles maps the domain's knowledge-base document ids to their titles
// (loaded once per data directory and domain; empty for a domain without
// documents/).
func (s *Script) titles(domain string) (map[string]string, error) {
	dir, err := data.Dir(s.cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return env.LoadOnce("scripted-titles:"+dir+":"+domain, func() (map[string]string, error) {
		kb, err := knowledge.Load(filepath.Join(data.DomainDir(dir, domain), "documents"))
		if err != nil {
			return nil, fmt.Errorf("scripted: %s documents: %w", domain, err)
		}
		out := make(map[string]string, kb.Len())
		for _, d := range kb.Docs {
			out[d.ID] = d.Title
		}
		return out, nil
	})
}
