package episode

import (
	"encoding/json"
	"strings"

	"tau2rl/tau2/data"
)

// τ²'s verbatim prompt constants (src/tau2/agent/llm_agent.py,
// src/tau2/orchestrator/orchestrator.py, src/tau2/user/user_simulator_base.py
// @ a2c0247; ../shared/tau2-data/derived/prompt_templates.json).
const (
	// Greeting is DEFAULT_FIRST_AGENT_MESSAGE, injected by the orchestrator (one copy, in
	// tau2/data, shared with the evaluator's gold transcripts).
	Greeting = data.FirstAgentMessage

	soloInstruction = "You are a customer service agent that helps the user according to the <policy> provided below.\n" +
		"You will be provided with a ticket that contains the user's request.\n" +
		"You will need to plan and call the appropriate tools to solve the ticket.\n\n" +
		"You cannot communicate with the user, only make tool calls.\n" +
		"Stop when you consider that you have solved the ticket.\n" +
		"To do so, send a message containing a single tool call to the `" + DoneTool + "` tool. Do not include any other tool calls in this last message.\n\n" +
		"Always follow the policy. Always make sure you generate valid JSON only."

	// StopToken, TransferToken and OutOfScopeToken end an episode when the
	// user simulator writes them (any of them, as a substring).
	StopToken       = "###STOP###"
	TransferToken   = "###TRANSFER###"
	OutOfScopeToken = "###OUT-OF-SCOPE###"

	// DoneTool is the solo agent's stop function.
	DoneTool = "done"
	// ThinkTool is AReaL's no-op thinking tool (add_thinking_tool).
	ThinkTool = "think"
	// ThinkResult is what the think tool answers.
	ThinkResult = "Your thoughts are recorded. Please continue your work."
)

// StopTokens are the user-side stop tokens, in τ²'s order.
var StopTokens = []string{StopToken, TransferToken, OutOfScopeToken}

// IsUserStop is τ²'s UserSimulator.is_stop: a text message (no tool calls)
// containing any stop token.
func IsUserStop(content string, hasToolCalls bool) bool {
	if hasToolCalls {
		return false
	}
	for _, t := range StopTokens {
		if strings.Contains(content, t) {
			return true
		}
	}
	return false
}

// AgentSystemPrompt is LLMAgent's system prompt for a domain policy (tau2/data's, the one
// copy of τ²'s AGENT_INSTRUCTION and SYSTEM_PROMPT).
func AgentSystemPrompt(policy string) string { return data.AgentSystemPrompt(policy) }

// SoloSystemPrompt is LLMSoloAgent's system prompt: the solo instruction,
// the (solo) policy and the task's ticket ("None" when the task has none, as
// Python's str.format renders it).
func SoloSystemPrompt(policy string, ticket *string) string {
	t := "None"
	if ticket != nil {
		t = *ticket
	}
	return "<instructions>\n" + soloInstruction + "\n</instructions>\n<policy>\n" + policy + "\n</policy>\n<ticket>\n" + t + "\n</ticket>"
}

// UserSystemPrompt is the user simulator's system prompt for a task: τ²'s
// guidelines (the tools variant when the user has tools) and the scenario.
func UserSystemPrompt(dataDir string, task *data.Task, userHasTools bool) (string, error) {
	g, err := data.UserGuidelines(dataDir, userHasTools)
	if err != nil {
		return "", err
	}
	return data.UserSystemPrompt(g, task), nil
}

// thinkToolSchema is τ²'s Tool(think).openai_schema for AReaL's think
// function (docstring: short description, blank line, long description;
// the parameter has no description).
const thinkToolSchema = `{"type": "function", "function": {"name": "think", "description": "Use this tool to think. The thoughts will be visible in the history.\n\nOnly use this tool to think when necessary.", "parameters": {"properties": {"thoughts": {"title": "Thoughts", "type": "string"}}, "required": ["thoughts"], "title": "parameters", "type": "object"}}}`

// doneToolSchema is τ²'s as_tool(done).openai_schema for the solo agent.
const doneToolSchema = `{"type": "function", "function": {"name": "done", "description": "Call this function when you are done with the task.", "parameters": {"properties": {}, "title": "parameters", "type": "object"}}}`

// ThinkToolSchema returns the think tool's OpenAI schema.
func ThinkToolSchema() json.RawMessage { return json.RawMessage(thinkToolSchema) }

// DoneToolSchema returns the done tool's OpenAI schema.
func DoneToolSchema() json.RawMessage { return json.RawMessage(doneToolSchema) }
