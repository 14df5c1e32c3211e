package banking_knowledge

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

//go:embed tools.json
var schemasJSON string

var schemas = env.MustParseSchemas(schemasJSON)

// transferReasons is TransferReasonLiteral.
var transferReasons = []string{
	"fraud_or_security_concern", "account_closure_request", "deceased_account_holder",
	"legal_or_regulatory_matter", "account_ownership_dispute", "complex_billing_dispute",
	"abusive_customer_behavior", "third_party_inquiry", "technical_system_error",
	"unconfirmed_external_communication", "customer_demands_after_unavailable_offer_refusal",
	"kb_search_unsuccessful_customer_requests_transfer", "specialized_department_required",
	"accessibility_or_special_needs", "customer_frustrated_demands_human",
	"supervisor_request_service_complaint", "customer_requests_human_no_specific_reason",
	"request_completed_customer_wants_human_followup", "other",
}

// tool builds an env.Tool from tools.json and upstream's type and
// mutates_state (discoverable.json).
func tool(name string, side map[string]*toolMeta, f func(db *DB, a *env.Args) (any, error)) *env.Tool {
	m := side[name]
	if m == nil {
		panic("banking_knowledge: no metadata for tool " + name)
	}
	t := env.NewTool(name, env.ToolType(m.Type), schemas.Get(name), f)
	t.Mutates = m.Mutates
	return t
}

// arg returns str(value) of an argument, or its default when absent.
func arg(a *env.Args, name, def string) string {
	if !a.Has(name) {
		return def
	}
	return pyStr(a.Raw(name))
}

// baseAgentTools are KnowledgeTools' @is_tool methods in definition order.
func baseAgentTools() []*env.Tool {
	m := agentMeta
	return []*env.Tool{
		tool("transfer_to_human_agents", m, func(db *DB, a *env.Args) (any, error) {
			reason := a.Raw("reason")
			if !a.Has("reason") {
				reason = "other"
			}
			rs, _ := reason.(string)
			if !slices.Contains(transferReasons, rs) {
				return fmt.Sprintf("Error: Invalid transfer reason '%s'. Must be one of: %s", pyStr(reason), strings.Join(transferReasons, ", ")), nil
			}
			return fmt.Sprintf("Transfer successful (reason: %s). A human agent will assist you shortly.", rs), nil
		}),
		tool("get_current_time", m, func(db *DB, a *env.Args) (any, error) {
			return "The current time is 2025-11-14 03:40:00 EST.", nil
		}),
		tool("get_user_information_by_id", m, func(db *DB, a *env.Args) (any, error) {
			return db.queryTool("users", byField("user_id", arg(a, "user_id", ""))), nil
		}),
		tool("get_user_information_by_name", m, func(db *DB, a *env.Args) (any, error) {
			return db.queryTool("users", byField("name", arg(a, "customer_name", ""))), nil
		}),
		tool("get_user_information_by_email", m, func(db *DB, a *env.Args) (any, error) {
			return db.queryTool("users", byField("email", arg(a, "email", ""))), nil
		}),
		tool("change_user_email", m, func(db *DB, a *env.Args) (any, error) {
			uid, email := a.Raw("user_id"), a.Raw("new_email")
			id, ok := uid.(string)
			if !ok || !db.Users.Data.Has(id) {
				return fmt.Sprintf("Error: User with ID '%s' not found.", pyStr(uid)), nil
			}
			db.updateRecord("users", id, "email", email)
			return fmt.Sprintf("Email updated successfully.\n  - User ID: %s\n  - New Email: %s", id, pyStr(email)), nil
		}),
		tool("get_referrals_by_user", m, func(db *DB, a *env.Args) (any, error) {
			return db.queryTool("referrals", byField("referrer_id", arg(a, "user_id", ""))), nil
		}),
		tool("get_credit_card_transactions_by_user", m, func(db *DB, a *env.Args) (any, error) {
			return db.queryTool("credit_card_transaction_history", byField("user_id", arg(a, "user_id", ""))), nil
		}),
		tool("get_credit_card_accounts_by_user", m, func(db *DB, a *env.Args) (any, error) {
			return db.queryTool("credit_card_accounts", byField("user_id", arg(a, "user_id", ""))), nil
		}),
		tool("log_verification", m, logVerification),
		tool("give_discoverable_user_tool", m, giveDiscoverableUserTool),
		tool("unlock_discoverable_agent_tool", m, unlockDiscoverableAgentTool),
		tool("call_discoverable_agent_tool", m, callDiscoverableAgentTool),
		tool("list_discoverable_agent_tools", m, func(db *DB, a *env.Args) (any, error) {
			res := db.queryTool("agent_discoverable_tools", "{}")
			if strings.Contains(res, "No results found") {
				return "No agent tools have been called yet. Search the knowledge base to discover available tools.", nil
			}
			return "Your called agent tools:\n" + res, nil
		}),
	}
}

func logVerification(db *DB, a *env.Args) (any, error) {
	name, uid, tv := a.Raw("name"), a.Raw("user_id"), a.Raw("time_verified")
	uidS, ok1 := uid.(string)
	tvS, ok2 := tv.(string)
	if !ok1 || !ok2 {
		// generate_verification_id concatenates and calls str.replace
		bad := uid
		if ok1 {
			bad = tv
		}
		if !ok2 {
			return nil, fmt.Errorf("'%s' object has no attribute 'replace'", pyjson.TypeName(bad))
		}
		return nil, fmt.Errorf("can only concatenate str (not \"%s\") to str", pyjson.TypeName(uid))
	}
	rec := pyjson.NewObject("name", name, "user_id", uid, "address", a.Raw("address"),
		"email", a.Raw("email"), "phone_number", a.Raw("phone_number"),
		"date_of_birth", a.Raw("date_of_birth"), "time_verified", tv)
	if !db.addToDB("verification_history", verificationID(uidS, tvS), rec) {
		return "Failed to log verification: Record may already exist.", nil
	}
	return fmt.Sprintf("Verification logged successfully.\n  - User: %s (ID: %s)\n  - Verified at: %s", pyStr(name), uidS, tvS), nil
}

// loadsArgs is json.loads(arguments) for the arguments of the discoverable
// tool wrappers: a JSONDecodeError becomes the wrapper's error text, a
// non-str argument is Python's TypeError (a tool error).
func loadsArgs(a *env.Args) (v any, errText string, err error) {
	raw := a.Raw("arguments")
	if !a.Has("arguments") {
		raw = "{}"
	}
	s, ok := raw.(string)
	if !ok {
		return nil, "", fmt.Errorf("the JSON object must be str, bytes or bytearray, not %s", pyjson.TypeName(raw))
	}
	v, err = pyjson.Loads(s)
	if err != nil {
		return nil, "Error: Invalid JSON in arguments: " + err.Error(), nil
	}
	return v, "", nil
}

// argNames iterates a loaded arguments value as Python's `for k in v`.
func argNames(v any) ([]string, error) {
	switch x := v.(type) {
	case *pyjson.Object:
		return x.Keys(), nil
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = pyStr(e)
		}
		return out, nil
	case string:
		var out []string
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", pyjson.TypeName(v))
}

func giveDiscoverableUserTool(db *DB, a *env.Args) (any, error) {
	nameV := a.Raw("discoverable_tool_name")
	name, _ := nameV.(string)
	m := userMeta[name]
	if m == nil || !m.Discoverable {
		return fmt.Sprintf("Error: Unknown discoverable tool '%s'.", pyStr(nameV)), nil
	}
	v, errText, err := loadsArgs(a)
	if err != nil || errText != "" {
		return errText, err
	}
	names, err := argNames(v)
	if err != nil {
		return nil, err
	}
	for _, k := range names {
		if k == "self" {
			continue
		}
		if !slices.ContainsFunc(m.Params, func(p []*string) bool { return *p[0] == k }) {
			return "Error: Unexpected parameter: " + k, nil
		}
	}
	db.addToDB("user_discoverable_tools", detID("user_discoverable_tool:"+name, 16),
		pyjson.NewObject("tool_name", name, "status", "GIVEN"))
	argsStr := "(no arguments)"
	if truthy(v) {
		argsStr = dumpsIndent2(v)
	}
	return "Tool given to user: " + name + "\nDescription: " + m.Info.Description + "\nArguments: " + argsStr +
		"\n\nThe user can now execute this action by calling `call_discoverable_user_tool` with discoverable_tool_name='" +
		name + "' and the same arguments.", nil
}

func unlockDiscoverableAgentTool(db *DB, a *env.Args) (any, error) {
	nameV := a.Raw("agent_tool_name")
	name, _ := nameV.(string)
	m := agentMeta[name]
	if m == nil || !m.Discoverable {
		return fmt.Sprintf("Error: Unknown agent tool '%s'. This tool is not available.", pyStr(nameV)), nil
	}
	db.state.unlocked[name] = true
	return "Tool unlocked: " + name + "\nDescription: " + m.Info.Description + "\n\n" + formatForAgent(m) +
		"\n\nYou can now use this tool by calling `call_discoverable_agent_tool` with agent_tool_name='" +
		name + "' and the required arguments.", nil
}

// errNoBody is a discoverable tool in discoverable.json without a Go body;
// TestEveryDiscoverableToolPorted keeps it from happening.
var errNoBody = errors.New("banking_knowledge: discoverable tool without a Go body")

func callDiscoverableAgentTool(db *DB, a *env.Args) (any, error) {
	nameV := a.Raw("agent_tool_name")
	name, _ := nameV.(string)
	m := agentMeta[name]
	if m == nil || !m.Discoverable {
		return fmt.Sprintf("Error: Unknown agent tool '%s'. This tool is not available.", pyStr(nameV)), nil
	}
	if !db.state.unlocked[name] {
		return "Error: Tool '" + name + "' has not been unlocked. You must first use `unlock_discoverable_agent_tool` to unlock this tool before calling it.", nil
	}
	v, errText, err := loadsArgs(a)
	if err != nil || errText != "" {
		return errText, err
	}
	args, ok := floatInts(v).(*pyjson.Object)
	if !ok {
		return fmt.Sprintf("Error: Invalid arguments: tau2.domains.banking_knowledge.tools.KnowledgeTools.%s() argument after ** must be a mapping, not %s", name, pyjson.TypeName(v)), nil
	}
	if err := bindPy("KnowledgeTools", m, args); err != nil {
		return "Error: Invalid arguments: " + err.Error(), nil
	}
	f := agentDiscoverable[name]
	if f == nil {
		return nil, fmt.Errorf("%w: %s", errNoBody, name)
	}
	res, err := f(db, args)
	var te *pyTypeError
	if errors.As(err, &te) {
		return "Error: Invalid arguments: " + te.msg, nil
	}
	if err != nil {
		return nil, err
	}
	if m.Mutates || db.state.readLogAllow[name] {
		db.addToDB("agent_discoverable_tools", detID("agent_discoverable_tool:"+name, 16),
			pyjson.NewObject("tool_name", name, "status", "CALLED"))
	}
	return res, nil
}

// agentDiscoverable holds the ported bodies of KnowledgeTools' discoverable
// tools, by name (agent_discoverable*.go).
var agentDiscoverable = map[string]discoverableFunc{}

// userDiscoverable holds KnowledgeUserTools' discoverable tools.
var userDiscoverable = map[string]discoverableFunc{}

// pyTypeError is a Python TypeError raised inside a discoverable tool's
// body; the call wrappers catch TypeError and report it as text.
type pyTypeError struct{ msg string }

func (e *pyTypeError) Error() string { return e.msg }

func typeErrorf(format string, a ...any) error { return &pyTypeError{fmt.Sprintf(format, a...)} }
