package env

import (
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"

	"tau2rl/tau2/data"
	"tau2rl/tau2/pyjson"
)

// Requestors of tool calls.
const (
	Assistant = "assistant"
	User      = "user"
)

// Side is one side of an environment: a toolkit and the DB it operates on.
// A domain without user tools has a zero user Side.
type Side struct {
	Toolkit *Toolkit
	DB      DB
}

// Environment is one episode's τ² environment: the domain's policy, the
// agent side, the optional user side (telecom device, mock inbox) and the
// domain's sync hook. It is not safe for concurrent use; give every episode
// its own (Domain.New / registry New).
type Environment struct {
	Domain string
	Policy string
	Agent  Side
	User   Side
	// Solo is τ²'s solo mode: assistant calls to user tools resolve to the
	// user toolkit, user calls are refused.
	Solo bool
	// SyncHook is τ²'s sync_tools(): run at construction by the domain,
	// after every successful tool call of Call/CallObject, after every env
	// function, and by orchestrators after each step. Nil for domains
	// without coupling (airline, retail, mock).
	SyncHook func(e *Environment) error
	// TaskSetup, when set, adapts a fresh environment to the task it will
	// run or grade, before the task's initial state: banking_knowledge's
	// golden_retrieval policy (the task's required documents) and the
	// read-log allowlist derived from the gold actions (τ²'s
	// _build_env_kwargs). evaluator.InitializeEnv calls it.
	TaskSetup func(e *Environment, task *data.Task) error
}

// Sync runs the domain's sync hook, if any.
func (e *Environment) Sync() error {
	if e.SyncHook == nil {
		return nil
	}
	return e.SyncHook(e)
}

// Fork returns an independent copy of the environment (its DBs forked).
func (e *Environment) Fork() *Environment {
	c := *e
	sameDB := e.Agent.DB != nil && e.User.DB != nil && any(e.Agent.DB) == any(e.User.DB)
	if e.Agent.DB != nil {
		c.Agent.DB = e.Agent.DB.Fork()
	}
	if e.User.DB != nil {
		if sameDB {
			c.User.DB = c.Agent.DB
		} else {
			c.User.DB = e.User.DB.Fork()
		}
	}
	return &c
}

// side returns the side that serves a call by requestor (τ²'s make_tool_call).
func (e *Environment) side(requestor, name string) (*Side, error) {
	switch requestor {
	case User:
		if e.Solo {
			return nil, errors.New("User tool calls are not allowed in solo mode")
		}
		if e.User.Toolkit == nil {
			return nil, errors.New("User tools not available")
		}
		return &e.User, nil
	case Assistant, "":
		if e.Solo && e.User.Toolkit != nil {
			if _, ok := e.User.Toolkit.Tool(name); ok {
				return &e.User, nil
			}
		}
		if e.Agent.Toolkit == nil {
			return nil, errors.New("Tools not available")
		}
		return &e.Agent, nil
	}
	return nil, fmt.Errorf("Invalid requestor: %s", requestor)
}

// Tools returns the agent's tools (in τ² order); in solo mode the agent
// also gets the user tools (appended, as τ²'s solo agent does).
func (e *Environment) Tools() []*Tool {
	tools := e.Agent.Toolkit.Tools()
	if e.Solo {
		tools = append(append([]*Tool{}, tools...), e.User.Toolkit.Tools()...)
	}
	return tools
}

// UserTools returns the user simulator's tools (nil when the domain has none).
func (e *Environment) UserTools() []*Tool { return e.User.Toolkit.Tools() }

// LookupTool finds a tool on either side (τ²'s _has_tool).
func (e *Environment) LookupTool(name string) (*Tool, bool) {
	if t, ok := e.Agent.Toolkit.Tool(name); ok {
		return t, true
	}
	return e.User.Toolkit.Tool(name)
}

// HasTool reports whether either side has the named tool.
func (e *Environment) HasTool(name string) bool {
	_, ok := e.LookupTool(name)
	return ok
}

// IsMutating is τ²'s _is_mutating_tool: true for mutating tools and, as a
// safe default, for unknown names.
func (e *Environment) IsMutating(name string) bool {
	if t, ok := e.LookupTool(name); ok {
		return t.Mutates
	}
	return true
}

// MakeToolCall runs a tool with decoded arguments and returns its raw
// result, without sync (τ²'s make_tool_call, used to replay gold actions).
// A panic inside the tool is recovered and returned as an error. The result
// may share records with the DB (and, for reads, with other episodes): do
// not modify it; serialize it with ToJSONStr.
func (e *Environment) MakeToolCall(requestor, name string, args *pyjson.Object) (res any, err error) {
	s, err := e.side(requestor, name)
	if err != nil {
		return nil, err
	}
	t, ok := s.Toolkit.Tool(name)
	if !ok {
		return nil, fmt.Errorf("Tool '%s' not found.", name)
	}
	if args == nil {
		args = &pyjson.Object{}
	}
	if err := bindArgs(s.Toolkit.Class, name, t.Params, args); err != nil {
		return nil, err
	}
	return callSafely(name, t.Func, s.DB, args)
}

func callSafely(name string, f Func, db DB, args *pyjson.Object) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, &PanicError{Func: name, Value: r, Stack: debug.Stack()}
		}
	}()
	return f(db, NewArgs(name, args))
}

// PanicError is a recovered panic inside a tool or env function; it is a
// bug in the Go port, reported as a tool error rather than crashing the
// episode. Metrics and logs should count it separately (errors.As).
type PanicError struct {
	Func  string
	Value any
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("internal error in %s: %v", p.Func, p.Value)
}

// CallObject is τ²'s get_response for decoded arguments: run the tool, sync,
// and serialize. Errors become ("Error: <message>", true); the DB keeps any
// mutation made before the error, as in Python.
func (e *Environment) CallObject(requestor, name string, args *pyjson.Object) (content string, isErr bool) {
	res, err := e.MakeToolCall(requestor, name, args)
	if err == nil {
		err = e.Sync()
	}
	if err != nil {
		return "Error: " + err.Error(), true
	}
	s, err := ToJSONStr(res)
	if err != nil {
		return "Error: " + err.Error(), true
	}
	return s, false
}

// Call is CallObject for the raw JSON arguments string of an LLM tool call.
// Empty arguments mean no arguments; malformed JSON and non-object JSON are
// tool errors (in τ² they abort the simulation; here they count toward
// max_errors like any tool error).
func (e *Environment) Call(requestor, name, argsJSON string) (content string, isErr bool) {
	args, err := DecodeArguments(argsJSON)
	if err != nil {
		if s, serr := e.side(requestor, name); serr == nil {
			if _, ok := s.Toolkit.Tool(name); !ok {
				return fmt.Sprintf("Error: Tool '%s' not found.", name), true
			}
		}
		return "Error: " + err.Error(), true
	}
	return e.CallObject(requestor, name, args)
}

// DecodeArguments parses the arguments string of a tool call: "" (or only
// whitespace) is no arguments; anything else must be a JSON object.
func DecodeArguments(argsJSON string) (*pyjson.Object, error) {
	if strings.TrimSpace(argsJSON) == "" {
		return &pyjson.Object{}, nil
	}
	v, err := pyjson.Loads(argsJSON)
	if err != nil {
		return nil, fmt.Errorf("Invalid JSON in tool call arguments: %w", err)
	}
	o, ok := v.(*pyjson.Object)
	if !ok {
		return nil, fmt.Errorf("argument after ** must be a mapping, not %s", pyjson.TypeName(v))
	}
	return o, nil
}

// RunEnvFunction is τ²'s run_env_function_call: call a function of the
// agent ("assistant") or user toolkit by name with keyword arguments (env
// functions first, then tools), then sync. Used for initialization_actions
// and env_assertions.
func (e *Environment) RunEnvFunction(envType, funcName string, args *pyjson.Object) (any, error) {
	var s *Side
	switch envType {
	case User:
		s = &e.User
	case Assistant:
		s = &e.Agent
	default:
		return nil, fmt.Errorf("Invalid environment type: %s", envType)
	}
	if s.Toolkit == nil {
		return nil, fmt.Errorf("'NoneType' object has no attribute '%s'", funcName)
	}
	name, params, f, ok := s.Toolkit.resolveFunc(funcName)
	if !ok {
		return nil, fmt.Errorf("'%s' object has no attribute '%s'", s.Toolkit.Class, funcName)
	}
	if args == nil {
		args = &pyjson.Object{}
	}
	if err := bindArgs(s.Toolkit.Class, name, params, args); err != nil {
		return nil, err
	}
	res, err := callSafely(name, f, s.DB, args)
	if err != nil {
		return nil, err
	}
	if err := e.Sync(); err != nil {
		return nil, err
	}
	return res, nil
}

// RunAssertion is τ²'s run_env_assertion without raising: it returns
// whether the function's bool result equals assertValue. A non-bool result
// or a failing function is an error (in τ² it aborts the evaluation).
func (e *Environment) RunAssertion(envType, funcName string, args *pyjson.Object, assertValue bool) (bool, error) {
	res, err := e.RunEnvFunction(envType, funcName, args)
	if err != nil {
		return false, err
	}
	b, ok := res.(bool)
	if !ok {
		return false, fmt.Errorf("Function %s returned %s instead of bool", funcName, pyTypeOf(res))
	}
	return b == assertValue, nil
}

func pyTypeOf(v any) string {
	return "<class '" + pyjson.TypeName(v) + "'>"
}

// ApplyInitializationData applies a task's initialization_data (agent_data,
// user_data; nil when absent) like τ²'s set_state, including its aliasing
// quirk: after updating the agent DB the user toolkit is pointed at the
// agent DB (and vice versa after user_data), exactly as tau2-bench does.
func (e *Environment) ApplyInitializationData(agentData, userData *pyjson.Object) error {
	if agentData != nil {
		if e.Agent.DB == nil {
			return errors.New("Database has not been initialized.")
		}
		db, err := updateDB(e.Agent.DB, agentData)
		if err != nil {
			return err
		}
		e.Agent.DB = db
		if e.User.Toolkit != nil && e.User.DB != nil {
			e.User.DB = e.Agent.DB
		}
	}
	if userData != nil {
		if e.User.DB == nil {
			return errors.New("Database has not been initialized.")
		}
		db, err := updateDB(e.User.DB, userData)
		if err != nil {
			return err
		}
		e.User.DB = db
		if e.Agent.Toolkit != nil && e.Agent.DB != nil {
			e.Agent.DB = e.User.DB
		}
	}
	return nil
}

// updateDB returns a new DB: a fork of db with update merged in (τ²'s
// update_pydantic_model_with_dict creates a new instance too).
func updateDB(db DB, update *pyjson.Object) (DB, error) {
	n := db.Fork()
	if err := pyjson.MergeInto(n, update); err != nil {
		return nil, fmt.Errorf("env: initialization_data: %w", err)
	}
	return n, nil
}

// DBHash is τ²'s get_db_hash: the hex sha256 of
// json.dumps(db.model_dump(), sort_keys=True, default=str); "" for a nil DB
// (τ²'s None).
func DBHash(db DB) (string, error) {
	if isNil(db) {
		return "", nil
	}
	return pyjson.Hash(db)
}

// Hashes returns the agent and user DB hashes (τ²'s get_db_hash and
// get_user_db_hash; "" where a side has no DB).
func (e *Environment) Hashes() (agent, user string, err error) {
	if agent, err = DBHash(e.Agent.DB); err != nil {
		return "", "", err
	}
	if e.User.Toolkit != nil {
		if user, err = DBHash(e.User.DB); err != nil {
			return "", "", err
		}
	}
	return agent, user, nil
}

// SameState reports whether two environments have equal agent and user DBs
// (equal τ² hashes), comparing only what differs when both were forked from
// the same loaded DB: the fast DB check for grading.
func SameState(a, b *Environment) (bool, error) {
	eq, err := dbEqual(a.Agent.DB, b.Agent.DB)
	if err != nil || !eq {
		return eq, err
	}
	ua, ub := a.User.DB, b.User.DB
	if a.User.Toolkit == nil {
		ua = nil
	}
	if b.User.Toolkit == nil {
		ub = nil
	}
	return dbEqual(ua, ub)
}

func dbEqual(a, b DB) (bool, error) {
	if isNil(a) || isNil(b) {
		return isNil(a) == isNil(b), nil
	}
	return pyjson.Equal(a, b)
}

func isNil(db DB) bool {
	if db == nil {
		return true
	}
	v := reflect.ValueOf(db)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "NoneType"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// EnableSolo switches the environment to solo mode after checking, like
// τ²'s validate_solo_mode, that agent and user tool names do not overlap.
func (e *Environment) EnableSolo() error {
	for _, t := range e.User.Toolkit.Tools() {
		if _, ok := e.Agent.Toolkit.Tool(t.Name); ok {
			return fmt.Errorf("Tool names overlap: {'%s'}", t.Name)
		}
	}
	e.Solo = true
	return nil
}
