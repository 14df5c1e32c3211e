// Package env is the τ² environment framework in Go: tools and toolkits,
// per-episode environments over copy-on-write domain DBs, τ²-exact tool
// result serialization and errors, environment functions and assertions,
// DB hashing, and the registry that builds any domain by name.
//
// It mirrors tau2-bench's src/tau2/environment/{tool,toolkit,environment}.py.
// Domain packages (airline, retail, telecom, mock) declare their DB types
// with pyjson.Map / pyjson.Table collections, write their tools as Go
// functions over that DB, and register a constructor with Register.
package env

import (
	"fmt"
	"slices"

	"tau2rl/tau2/pyjson"
)

// ToolType is τ²'s conceptual tool classification (ToolType enum).
type ToolType string

// The τ² tool types.
const (
	Read    ToolType = "read"
	Write   ToolType = "write"
	Think   ToolType = "think"
	Generic ToolType = "generic"
)

// DB is a domain database as held by one side (agent or user) of an
// environment. Implementations are pointer-to-struct models whose fields
// encode with pyjson (their dump is pydantic's model_dump()).
type DB interface {
	// Fork returns an independent copy for one episode. It must be cheap
	// (use pyjson.Table for large collections) and must not modify the
	// receiver when the receiver is a pristine loaded base, so that many
	// goroutines can fork one base at once.
	Fork() DB
}

// Func is the Go body of a tool or an environment function: it receives the
// DB of the toolkit's side and the call arguments, and returns the Python
// return value (string, model struct, slice, *pyjson.Object, number, bool,
// nil) or an error that becomes the tool message "Error: <err>".
type Func func(db DB, args *Args) (any, error)

// Param is one parameter of a Python tool signature, used to reproduce
// Python's TypeErrors for missing and unexpected keyword arguments.
type Param struct {
	Name     string
	Required bool // no default value in the Python signature
}

// Tool is one τ² tool.
type Tool struct {
	// Name is the function name sent to the LLM.
	Name string
	// Schema is the OpenAI tool schema ({"type": "function", "function":
	// {...}}) exactly as τ² sends it, in json.dumps form; tests compare it
	// with ../shared/tau2-data/derived/tool_schemas.json.
	Schema string
	// Type is τ²'s ToolType.
	Type ToolType
	// Mutates is τ²'s mutates_state: only mutating tools are re-executed
	// when a trajectory is replayed for grading. Defaults to Type == Write
	// when built with NewTool.
	Mutates bool
	// Params is the Python signature, derived from Schema by NewTool.
	Params []Param
	// Func is the implementation.
	Func Func
}

// NewTool builds a Tool whose implementation takes the domain's concrete DB
// type D. The parameters are read from the schema (properties order,
// "required" list). It panics on a malformed schema: tools are package-level
// declarations, so that is a programming error caught by every test.
func NewTool[D DB](name string, typ ToolType, schema string, f func(db D, a *Args) (any, error)) *Tool {
	params, err := ParamsFromSchema(schema)
	if err != nil {
		panic(fmt.Sprintf("env: tool %s: %v", name, err))
	}
	return &Tool{
		Name:    name,
		Schema:  schema,
		Type:    typ,
		Mutates: typ == Write,
		Params:  params,
		Func:    typed(f),
	}
}

// typed adapts a function over a concrete DB type to Func. A DB of another
// type (possible only through τ²'s DB aliasing in set_state) is reported
// the way Python reports a missing attribute.
func typed[D DB](f func(db D, a *Args) (any, error)) Func {
	return func(db DB, a *Args) (any, error) {
		d, ok := db.(D)
		if !ok {
			return nil, fmt.Errorf("'%s' object has no attribute required by this tool", typeName(db))
		}
		return f(d, a)
	}
}

// ParamsFromSchema extracts the Python signature from an OpenAI tool schema:
// parameter names in properties order, required per the "required" list.
func ParamsFromSchema(schema string) ([]Param, error) {
	v, err := pyjson.LoadsObject(schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	fn, _ := v.Get("function")
	fo, ok := fn.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("schema: no function object")
	}
	pv, _ := fo.Get("parameters")
	po, ok := pv.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("schema: no parameters object")
	}
	var required []string
	if rv, ok := po.Get("required"); ok {
		l, ok := rv.([]any)
		if !ok {
			return nil, fmt.Errorf("schema: required is not a list")
		}
		for _, r := range l {
			s, ok := r.(string)
			if !ok {
				return nil, fmt.Errorf("schema: required entry is not a string")
			}
			required = append(required, s)
		}
	}
	props, _ := po.Get("properties")
	pobj, ok := props.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("schema: no properties object")
	}
	params := make([]Param, 0, pobj.Len())
	for _, k := range pobj.Keys() {
		params = append(params, Param{Name: k, Required: slices.Contains(required, k)})
	}
	return params, nil
}

// EnvFunc is a non-tool function of a toolkit that tasks call by name:
// initialization_actions and env_assertions (τ² resolves any toolkit
// attribute with getattr, so tools are env functions too).
type EnvFunc struct {
	Name   string
	Params []Param
	Func   Func
}

// NewEnvFunc builds an EnvFunc over the concrete DB type D.
func NewEnvFunc[D DB](name string, params []Param, f func(db D, a *Args) (any, error)) *EnvFunc {
	return &EnvFunc{Name: name, Params: params, Func: typed(f)}
}

// Toolkit is the immutable set of tools (in the order sent to the LLM) and
// environment functions of one side of a domain. It is built once per
// process and shared by all environments.
type Toolkit struct {
	// Class is the Python class name ("AirlineTools"), used in Python-style
	// TypeError texts.
	Class  string
	tools  []*Tool
	byName map[string]*Tool
	funcs  map[string]*EnvFunc
}

// NewToolkit builds a toolkit; tool names must be unique.
func NewToolkit(class string, tools []*Tool, funcs ...*EnvFunc) (*Toolkit, error) {
	tk := &Toolkit{Class: class, byName: map[string]*Tool{}, funcs: map[string]*EnvFunc{}}
	for _, t := range tools {
		if t == nil || t.Func == nil || t.Name == "" {
			return nil, fmt.Errorf("env: toolkit %s: incomplete tool %v", class, t)
		}
		if _, dup := tk.byName[t.Name]; dup {
			return nil, fmt.Errorf("env: toolkit %s: duplicate tool %s", class, t.Name)
		}
		tk.tools = append(tk.tools, t)
		tk.byName[t.Name] = t
	}
	for _, f := range funcs {
		if _, dup := tk.funcs[f.Name]; dup {
			return nil, fmt.Errorf("env: toolkit %s: duplicate env function %s", class, f.Name)
		}
		tk.funcs[f.Name] = f
	}
	return tk, nil
}

// MustToolkit is NewToolkit for package-level declarations.
func MustToolkit(class string, tools []*Tool, funcs ...*EnvFunc) *Toolkit {
	tk, err := NewToolkit(class, tools, funcs...)
	if err != nil {
		panic(err)
	}
	return tk
}

// Tools returns the tools in τ²'s order. The slice must not be modified.
func (tk *Toolkit) Tools() []*Tool {
	if tk == nil {
		return nil
	}
	return tk.tools
}

// Tool returns the named tool.
func (tk *Toolkit) Tool(name string) (*Tool, bool) {
	if tk == nil {
		return nil, false
	}
	t, ok := tk.byName[name]
	return t, ok
}

// Names returns the tool names in order.
func (tk *Toolkit) Names() []string {
	out := make([]string, 0, len(tk.Tools()))
	for _, t := range tk.Tools() {
		out = append(out, t.Name)
	}
	return out
}

// SchemasJSON returns the JSON list of the tool schemas in order, as τ²
// passes `tools=[tool.openai_schema ...]` (json.dumps form).
func (tk *Toolkit) SchemasJSON() string {
	b := []byte{'['}
	for i, t := range tk.Tools() {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, t.Schema...)
	}
	return string(append(b, ']'))
}

// Subset returns a toolkit with only the named tools (τ²'s get_tools(include)
// for task.user_tools); unknown names are an error.
func (tk *Toolkit) Subset(names []string) (*Toolkit, error) {
	var tools []*Tool
	for _, n := range names {
		if _, ok := tk.byName[n]; !ok {
			return nil, fmt.Errorf("env: Tool(s) not found: [%q]. Available: %v", n, tk.Names())
		}
	}
	for _, t := range tk.tools {
		if slices.Contains(names, t.Name) {
			tools = append(tools, t)
		}
	}
	sub, err := NewToolkit(tk.Class, tools)
	if err != nil {
		return nil, err
	}
	sub.funcs = tk.funcs
	return sub, nil
}

// resolveFunc finds an environment function or tool by name (getattr).
func (tk *Toolkit) resolveFunc(name string) (string, []Param, Func, bool) {
	if tk == nil {
		return "", nil, nil, false
	}
	if f, ok := tk.funcs[name]; ok {
		return f.Name, f.Params, f.Func, true
	}
	if t, ok := tk.byName[name]; ok {
		return t.Name, t.Params, t.Func, true
	}
	return "", nil, nil, false
}

// bindArgs reproduces Python's keyword binding checks for
// Class.name(**args): the first unexpected keyword, then all missing
// required parameters.
func bindArgs(class, name string, params []Param, args *pyjson.Object) error {
	for _, k := range args.Keys() {
		if !slices.ContainsFunc(params, func(p Param) bool { return p.Name == k }) {
			return fmt.Errorf("%s.%s() got an unexpected keyword argument '%s'", class, name, k)
		}
	}
	var missing []string
	for _, p := range params {
		if p.Required && !args.Has(p.Name) {
			missing = append(missing, "'"+p.Name+"'")
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s.%s() missing 1 required positional argument: %s", class, name, missing[0])
	case 2:
		return fmt.Errorf("%s.%s() missing 2 required positional arguments: %s and %s", class, name, missing[0], missing[1])
	default:
		last := len(missing) - 1
		list := ""
		for i, m := range missing[:last] {
			if i > 0 {
				list += ", "
			}
			list += m
		}
		return fmt.Errorf("%s.%s() missing %d required positional arguments: %s, and %s", class, name, len(missing), list, missing[last])
	}
}
