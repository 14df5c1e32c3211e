package data

import "strings"

// AgentInstruction is τ²'s AGENT_INSTRUCTION (src/tau2/agent/llm_agent.py).
const AgentInstruction = "You are a customer service agent that helps the user according to the <policy> provided below.\n" +
	"In each turn you can either:\n- Send a message to the user.\n- Make a tool call.\nYou cannot do both at the same time.\n\n" +
	"Try to be helpful and always follow the policy. Always make sure you generate valid JSON only."

// FirstAgentMessage is the greeting the orchestrator injects as the agent's
// first message (DEFAULT_FIRST_AGENT_MESSAGE).
const FirstAgentMessage = "Hi! How can I help you today?"

// AgentSystemPrompt renders τ²'s LLMAgent system prompt:
// SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=policy).
func AgentSystemPrompt(policy string) string {
	return "<instructions>\n" + AgentInstruction + "\n</instructions>\n<policy>\n" + policy + "\n</policy>"
}

// Policy reads the agent policy of a domain whose policy is a single file:
// policy.md, or policy_solo.md in solo mode (airline, retail, mock; telecom
// composes its policy from several files in its own package).
func Policy(dataDir, domain string, solo bool) (string, error) {
	name := "policy.md"
	if solo {
		name = "policy_solo.md"
	}
	if strings.HasPrefix(domain, "telecom") {
		name = "main_policy.md"
		if solo {
			name = "main_policy_solo.md"
		}
	}
	return ReadFile(dataDir, domain, name)
}
