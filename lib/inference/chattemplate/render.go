package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Qwen3's chat markup.
const (
	IMStart       = "<|im_start|>"
	IMEnd         = "<|im_end|>"
	ThinkOpen     = "<think>"
	ThinkClose    = "</think>"
	ToolCallOpen  = "<tool_call>"
	ToolCallClose = "</tool_call>"
	ToolRespOpen  = "<tool_response>"
	ToolRespClose = "</tool_response>"

	toolsHeader = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	toolsFooter = "\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
		"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": " +
		"<args-json-object>}\n</tool_call><|im_end|>\n"
	// EmptyThink is what the generation prompt adds with enable_thinking=false.
	EmptyThink = "<think>\n\n</think>\n\n"
)

// Options are the template variables besides messages.
type Options struct {
	// Tools are OpenAI tool objects ({"type": "function", "function": {…}}),
	// rendered one per line with tojson in the system turn.
	Tools []json.RawMessage
	// AddGenerationPrompt ends the text with "<|im_start|>assistant\n".
	AddGenerationPrompt bool
	// EnableThinking nil leaves the variable undefined (thinking on); false
	// adds an empty think block to the generation prompt.
	EnableThinking *bool
}

// thinkingOff reports enable_thinking is defined and false.
func (o Options) thinkingOff() bool { return o.EnableThinking != nil && !*o.EnableThinking }

// GenerationPrompt is the text the template appends for add_generation_prompt.
func (o Options) GenerationPrompt() string {
	if o.thinkingOff() {
		return IMStart + "assistant\n" + EmptyThink
	}
	return IMStart + "assistant\n"
}

// Render renders messages exactly as Qwen3's chat template (the Jinja in its
// tokenizer_config.json) does under transformers' apply_chat_template.
//
// It is stricter than the template in two ways, so that mistakes surface as
// errors instead of silently different prompts: an empty message list and a
// role other than system/user/assistant/tool (which the template drops
// without a trace) are errors, as are tool-call arguments that are not JSON.
func Render(messages []Message, opts Options) (string, error) {
	if len(messages) == 0 {
		return "", fmt.Errorf("chattemplate: no messages")
	}
	for i, m := range messages {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return "", fmt.Errorf("chattemplate: message %d: role %q is not rendered by the Qwen3 template", i, m.Role)
		}
	}
	var b strings.Builder
	if len(opts.Tools) > 0 {
		b.WriteString(IMStart + "system\n")
		if messages[0].Role == RoleSystem {
			b.WriteString(messages[0].Content)
			b.WriteString("\n\n")
		}
		b.WriteString(toolsHeader)
		for i, t := range opts.Tools {
			b.WriteByte('\n')
			if err := AppendToJSON(&b, t); err != nil {
				return "", fmt.Errorf("chattemplate: tool %d: %w", i, err)
			}
		}
		b.WriteString(toolsFooter)
	} else if messages[0].Role == RoleSystem {
		b.WriteString(IMStart + "system\n" + messages[0].Content + IMEnd + "\n")
	}

	lastQuery := lastQueryIndex(messages)
	for i := range messages {
		if err := renderMessage(&b, messages, i, i == 0, i > lastQuery); err != nil {
			return "", err
		}
	}
	if opts.AddGenerationPrompt {
		b.WriteString(opts.GenerationPrompt())
	}
	return b.String(), nil
}

// lastQueryIndex is the template's ns.last_query_index: the last user message
// that is not a bare tool response, or the last index if there is none.
func lastQueryIndex(messages []Message) int {
	for i := len(messages) - 1; i >= 0; i-- {
		m := messages[i]
		if m.Role == RoleUser && !(strings.HasPrefix(m.Content, ToolRespOpen) && strings.HasSuffix(m.Content, ToolRespClose)) {
			return i
		}
	}
	return len(messages) - 1
}

// splitThinking is the template's reasoning extraction for an assistant
// message: reasoning_content if given, else the text around </think>.
func splitThinking(m Message) (content, reasoning string) {
	content = m.Content
	if m.ReasoningContent != nil {
		return content, *m.ReasoningContent
	}
	if strings.Contains(content, ThinkClose) {
		parts := strings.Split(content, ThinkClose)
		before := strings.Split(strings.TrimRight(parts[0], "\n"), ThinkOpen)
		return strings.TrimLeft(parts[len(parts)-1], "\n"), strings.TrimLeft(before[len(before)-1], "\n")
	}
	return content, ""
}

// renderMessage renders messages[i]. convFirst says messages[i] opens the
// conversation (a system message there was rendered with the tools block);
// afterLastQuery is loop.index0 > ns.last_query_index (only then is thinking
// kept).
func renderMessage(b *strings.Builder, messages []Message, i int, convFirst, afterLastQuery bool) error {
	m := messages[i]
	last := i == len(messages)-1
	switch m.Role {
	case RoleUser:
		b.WriteString(IMStart + m.Role + "\n" + m.Content + IMEnd + "\n")
	case RoleSystem:
		if !convFirst {
			b.WriteString(IMStart + m.Role + "\n" + m.Content + IMEnd + "\n")
		}
	case RoleAssistant:
		content, reasoning := splitThinking(m)
		if afterLastQuery && (last || reasoning != "") {
			b.WriteString(IMStart + m.Role + "\n" + ThinkOpen + "\n" + strings.Trim(reasoning, "\n") +
				"\n" + ThinkClose + "\n\n" + strings.TrimLeft(content, "\n"))
		} else {
			b.WriteString(IMStart + m.Role + "\n" + content)
		}
		for j, tc := range m.ToolCalls {
			if (j == 0 && content != "") || j > 0 {
				b.WriteByte('\n')
			}
			if err := writeToolCall(b, tc); err != nil {
				return fmt.Errorf("chattemplate: message %d tool call %d: %w", i, j, err)
			}
		}
		b.WriteString(IMEnd + "\n")
	case RoleTool:
		if i == 0 || messages[i-1].Role != RoleTool {
			b.WriteString(IMStart + "user")
		}
		b.WriteString("\n" + ToolRespOpen + "\n" + m.Content + "\n" + ToolRespClose)
		if last || messages[i+1].Role != RoleTool {
			b.WriteString(IMEnd + "\n")
		}
	}
	return nil
}

func writeToolCall(b *strings.Builder, tc ToolCall) error {
	b.WriteString(ToolCallOpen + "\n{\"name\": \"" + tc.Function.Name + "\", \"arguments\": ")
	args := bytes.TrimSpace(tc.Function.Arguments)
	if len(args) == 0 {
		return fmt.Errorf("%s: no arguments (use {} for none)", tc.Function.Name)
	}
	if args[0] == '"' {
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return fmt.Errorf("%s: arguments: %w", tc.Function.Name, err)
		}
		b.WriteString(s)
	} else if err := AppendToJSON(b, args); err != nil {
		return fmt.Errorf("%s: arguments: %w", tc.Function.Name, err)
	}
	b.WriteString("}\n" + ToolCallClose)
	return nil
}
