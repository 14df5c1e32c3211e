package chattemplate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Rendered is a Qwen3 chat text read back into its parts.
type Rendered struct {
	// Messages are the closed turns in order. Tool results grouped into one
	// user turn come back as separate tool messages (without call ids).
	// Assistant turns are parsed with ParseCompletion.
	Messages []Message
	// Tools are the tool objects of the system turn's "# Tools" block.
	Tools []json.RawMessage
	// OpenAssistant is true when the text ends with an open assistant turn
	// (a generation prompt); AssistantPrefix is what follows its
	// "<|im_start|>assistant\n" (e.g. an empty think block).
	OpenAssistant   bool
	AssistantPrefix string
}

// ParseRendered reads a prompt rendered by Render (or the incremental
// history) back into messages, for tools that only see token ids: the
// scripted test server, replay and debugging. A user message whose content
// itself starts with <tool_response> and ends with </tool_response> reads
// back as tool messages: the rendering does not tell them apart.
func ParseRendered(text string) (Rendered, error) {
	var r Rendered
	if !strings.HasPrefix(text, IMStart) {
		return r, fmt.Errorf("chattemplate: rendered text does not start with %s", IMStart)
	}
	turns := strings.Split(text[len(IMStart):], IMStart)
	for i, turn := range turns {
		role, body, ok := strings.Cut(turn, "\n")
		if !ok && role != RoleUser {
			return r, fmt.Errorf("chattemplate: turn %d: no newline after the role", i)
		}
		if role == RoleUser && !ok { // "<|im_start|>user" directly followed by "\n<tool_response>" is handled below
			body = ""
		}
		content, closed := strings.CutSuffix(body, IMEnd+"\n")
		if !closed {
			content, closed = strings.CutSuffix(body, IMEnd)
		}
		if !closed {
			if i != len(turns)-1 || role != RoleAssistant {
				return r, fmt.Errorf("chattemplate: turn %d (%s) is not closed by %s", i, role, IMEnd)
			}
			r.OpenAssistant, r.AssistantPrefix = true, body
			break
		}
		switch role {
		case RoleSystem:
			if i == 0 {
				if c, tools, found, err := splitToolsBlock(content); err != nil {
					return r, err
				} else if found {
					r.Tools = tools
					if c == "" {
						continue // tools only, no system message
					}
					content = c
				}
			}
			r.Messages = append(r.Messages, Message{Role: RoleSystem, Content: content})
		case RoleUser:
			if len(content) >= 2*len(ToolRespOpen)+3 && strings.HasPrefix(content, ToolRespOpen+"\n") && strings.HasSuffix(content, "\n"+ToolRespClose) {
				inner := content[len(ToolRespOpen)+1 : len(content)-len(ToolRespClose)-1]
				for _, part := range strings.Split(inner, "\n"+ToolRespClose+"\n"+ToolRespOpen+"\n") {
					r.Messages = append(r.Messages, Message{Role: RoleTool, Content: part})
				}
				continue
			}
			r.Messages = append(r.Messages, Message{Role: RoleUser, Content: content})
		case RoleAssistant:
			r.Messages = append(r.Messages, ParseCompletion(content).Message())
		default:
			return r, fmt.Errorf("chattemplate: turn %d: unknown role %q", i, role)
		}
	}
	return r, nil
}

// splitToolsBlock separates the system prompt from the "# Tools" block the
// template appends to it.
func splitToolsBlock(content string) (string, []json.RawMessage, bool, error) {
	i := strings.Index(content, toolsHeader)
	if i < 0 {
		return content, nil, false, nil
	}
	sys := strings.TrimSuffix(content[:i], "\n\n")
	rest := content[i+len(toolsHeader):]
	footer := strings.TrimSuffix(toolsFooter, IMEnd+"\n")
	j := strings.Index(rest, footer)
	if j < 0 {
		return "", nil, false, fmt.Errorf("chattemplate: system turn has a tools header but no tools footer")
	}
	var tools []json.RawMessage
	for _, line := range strings.Split(strings.TrimPrefix(rest[:j], "\n"), "\n") {
		if line == "" {
			continue
		}
		if !json.Valid([]byte(line)) {
			return "", nil, false, fmt.Errorf("chattemplate: tool line is not JSON: %.80q", line)
		}
		tools = append(tools, json.RawMessage(line))
	}
	return sys, tools, true, nil
}
