package banking_knowledge

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

// discoverable.json is written by testdata/oracle/harness.py from upstream's
// tools.py: for every tool method, its parameters (name, repr of the
// default or null), tool type, mutates_state, and for discoverable tools
// parse_discoverable_tool_docstring's result (what unlock and give show).
//
//go:embed discoverable.json
var discoverableJSON []byte

type toolMeta struct {
	Name         string      `json:"name"`
	Discoverable bool        `json:"discoverable"`
	Type         string      `json:"type"`
	Mutates      bool        `json:"mutates"`
	Params       [][]*string `json:"params"`
	Info         *toolInfo   `json:"tool_info"`
	infoOrdered  *pyjson.Object
}

type toolInfo struct {
	Name           string `json:"name"`
	Description    string `json:"description"`
	SuccessMessage string `json:"success_message"`
}

// discoverableFunc is the body of a discoverable tool: arguments already
// bound to the signature (missing ones absent, defaults not filled).
type discoverableFunc func(db *DB, a *pyjson.Object) (string, error)

var (
	agentMeta = map[string]*toolMeta{}
	userMeta  = map[string]*toolMeta{}
)

func init() {
	var m struct {
		Agent []*toolMeta `json:"agent"`
		User  []*toolMeta `json:"user"`
	}
	if err := json.Unmarshal(discoverableJSON, &m); err != nil {
		panic(fmt.Sprintf("banking_knowledge: discoverable.json: %v", err))
	}
	// the parameters of tool_info, in docstring order, are needed for the
	// unlock text: re-read the file with pyjson to keep the order.
	raw, err := pyjson.Loads(string(discoverableJSON))
	if err != nil {
		panic(err)
	}
	for side, list := range map[string][]*toolMeta{"agent": m.Agent, "user": m.User} {
		rl, _ := raw.(*pyjson.Object).Get(side)
		for i, t := range list {
			if t.Info != nil {
				o, _ := rl.([]any)[i].(*pyjson.Object).Get("tool_info")
				t.infoOrdered = o.(*pyjson.Object)
			}
			if side == "agent" {
				agentMeta[t.Name] = t
			} else {
				userMeta[t.Name] = t
			}
		}
	}
}

// bindPy reproduces Python's keyword binding of Class.name(**args): the
// first unexpected keyword, then the missing required parameters.
func bindPy(class string, t *toolMeta, args *pyjson.Object) error {
	for _, k := range args.Keys() {
		found := false
		for _, p := range t.Params {
			if *p[0] == k {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s.%s() got an unexpected keyword argument '%s'", class, t.Name, k)
		}
	}
	var missing []string
	for _, p := range t.Params {
		if p[1] == nil && !args.Has(*p[0]) {
			missing = append(missing, "'"+*p[0]+"'")
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s.%s() missing 1 required positional argument: %s", class, t.Name, missing[0])
	case 2:
		return fmt.Errorf("%s.%s() missing 2 required positional arguments: %s and %s", class, t.Name, missing[0], missing[1])
	}
	last := len(missing) - 1
	return fmt.Errorf("%s.%s() missing %d required positional arguments: %s, and %s", class, t.Name, len(missing), strings.Join(missing[:last], ", "), missing[last])
}

// formatForAgent is format_discoverable_tool_for_agent.
func formatForAgent(t *toolMeta) string {
	var ps []string
	pv, _ := t.infoOrdered.Get("parameters")
	params, _ := pv.(*pyjson.Object)
	for name, dv := range params.All() {
		d := dv.(*pyjson.Object)
		req := " (required)"
		if r, _ := d.Get("required"); r == false {
			req = " (optional)"
		}
		typ, _ := d.Get("type")
		desc, _ := d.Get("description")
		ps = append(ps, fmt.Sprintf("  - %s: %s%s - %s", name, pyStr(typ), req, pyStr(desc)))
	}
	section := "  (no parameters)"
	if len(ps) > 0 {
		section = strings.Join(ps, "\n")
	}
	return "Tool: " + t.Info.Name + "\nDescription: " + t.Info.Description + "\nParameters:\n" + section
}

// dumpsIndent2 is json.dumps(v, indent=2) (ensure_ascii, Python separators).
func dumpsIndent2(v any) string {
	var b strings.Builder
	var rec func(v any, depth int)
	rec = func(v any, depth int) {
		pad := strings.Repeat("  ", depth+1)
		switch x := v.(type) {
		case *pyjson.Object:
			if x.Len() == 0 {
				b.WriteString("{}")
				return
			}
			b.WriteString("{\n")
			i := 0
			for k, e := range x.All() {
				if i > 0 {
					b.WriteString(",\n")
				}
				i++
				b.WriteString(pad + pyjson.MustDumps(k) + ": ")
				rec(e, depth+1)
			}
			b.WriteString("\n" + strings.Repeat("  ", depth) + "}")
		case []any:
			if len(x) == 0 {
				b.WriteString("[]")
				return
			}
			b.WriteString("[\n")
			for i, e := range x {
				if i > 0 {
					b.WriteString(",\n")
				}
				b.WriteString(pad)
				rec(e, depth+1)
			}
			b.WriteString("\n" + strings.Repeat("  ", depth) + "]")
		default:
			b.WriteString(pyjson.MustDumps(x))
		}
	}
	rec(v, 0)
	return b.String()
}

// floatInts is json.loads(..., parse_int=float): every int becomes a float.
func floatInts(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case *pyjson.Object:
		o := pyjson.NewObject()
		for k, e := range x.All() {
			o.Set(k, floatInts(e))
		}
		return o
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = floatInts(e)
		}
		return l
	}
	if n, ok := num(v); ok {
		if _, isBool := v.(bool); !isBool {
			return n
		}
	}
	return v
}
