package banking_knowledge

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// validCreditCardTypes is KnowledgeUserTools.VALID_CREDIT_CARD_TYPES.
var validCreditCardTypes = []string{
	"Bronze Rewards Card", "Business Bronze Rewards Card", "Business Gold Rewards Card",
	"Business Platinum Rewards Card", "Business Silver Rewards Card", "Crypto-Cash Back",
	"Diamond Elite Card", "EcoCard", "Gold Rewards Card", "Green Rewards Card",
	"Platinum Rewards Card", "Silver Rewards Card", "Silver Zoom Card",
}

// rewardRate is one entry of CREDIT_CARD_REWARDS (category -> percent).
type rewardRate struct {
	cat  string
	rate float64
}

// creditCardRewards is KnowledgeUserTools.CREDIT_CARD_REWARDS, in order;
// "default" is each card's fallback.
var creditCardRewards = []struct {
	card  string
	rates []rewardRate
}{
	{"Bronze Rewards Card", []rewardRate{{"default", 1.0}}},
	{"Silver Rewards Card", []rewardRate{{"Travel", 4.0}, {"Software", 4.0}, {"default", 1.0}}},
	{"Gold Rewards Card", []rewardRate{{"default", 2.5}}},
	{"Platinum Rewards Card", []rewardRate{{"default", 10.0}}},
	{"Business Bronze Rewards Card", []rewardRate{{"default", 1.0}}},
	{"Business Silver Rewards Card", []rewardRate{{"Travel", 10.0}, {"Software", 10.0}, {"default", 1.0}}},
	{"Green Rewards Card", []rewardRate{{"Sustainable", 3.0}, {"default", 1.0}}},
	{"Business Gold Rewards Card", []rewardRate{{"Operations", 2.5}, {"default", 1.0}}},
	{"Business Platinum Rewards Card", []rewardRate{{"Travel", 4.0}, {"Software", 4.0}, {"Media", 4.0}, {"default", 1.5}}},
	{"Silver Zoom Card", []rewardRate{{"Transportation", 3.0}, {"default", 1.0}}},
	{"Diamond Elite Card", []rewardRate{{"default", 5.0}}},
	{"EcoCard", []rewardRate{{"Green", 5.0}, {"default", 1.0}}},
	{"Crypto-Cash Back", []rewardRate{{"default", 2.0}}},
}

// pyFloat is Python's float(v) for a JSON value; ok=false where it raises.
func pyFloat(v any) (float64, error) {
	switch x := v.(type) {
	case string:
		s := strings.TrimFunc(x, pyjson.IsSpace)
		t := strings.ReplaceAll(s, "_", "")
		low := strings.ToLower(t)
		switch strings.TrimLeft(low, "+-") {
		case "inf", "infinity":
			if strings.HasPrefix(low, "-") {
				return math.Inf(-1), nil
			}
			return math.Inf(1), nil
		case "nan":
			return math.NaN(), nil
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) || strings.Contains(s, "__") || strings.HasPrefix(t, "0x") || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") {
			return 0, fmt.Errorf("could not convert string to float: %s", pyjson.Repr(x))
		}
		return f, nil
	case nil, *pyjson.Object, []any:
		return 0, typeErrorf("float() argument must be a string or a real number, not '%s'", pyjson.TypeName(v))
	}
	f, _ := num(v)
	return f, nil
}

// pyInt is Python's int(x) for a float (truncation).
func pyInt(x float64) float64 { return math.Trunc(x) }

func baseUserTools() []*env.Tool {
	m := userMeta
	return []*env.Tool{
		tool("apply_for_credit_card", m, func(db *DB, a *env.Args) (any, error) {
			ct := a.Raw("card_type")
			cts, _ := ct.(string)
			if !slices.Contains(validCreditCardTypes, cts) {
				return fmt.Sprintf("Error: Invalid card_type '%s'. Must be one of: %s", pyStr(ct), pyListRepr(validCreditCardTypes)), nil
			}
			income, err := pyFloat(a.Raw("annual_income"))
			if err != nil {
				return "Error: Invalid annual_income. Must be a number.", nil
			}
			rho := a.Raw("rho_bank_subscription")
			if !a.Has("rho_bank_subscription") {
				rho = false
			}
			name := a.Raw("customer_name")
			id := detID(fmt.Sprintf("credit_card:%s:%s:%s:%s", cts, pyStr(name), floatRepr(income), pyStr(rho)), 16)
			rec := pyjson.NewObject("application_id", id, "card_type", cts, "customer_name", name,
				"annual_income", income, "rho_bank_subscription", rho, "status", "PENDING", "date", todayStr)
			if !db.addToDB("credit_card_applications", id, rec) {
				return fmt.Sprintf("Failed to submit application: Record ID '%s' may already exist.", id), nil
			}
			return "Credit card application submitted:\nYour application has been successfully submitted. You will receive a decision within 5-7 business days via email.", nil
		}),
		tool("submit_referral", m, func(db *DB, a *env.Args) (any, error) {
			uid, at := a.Raw("user_id"), a.Raw("account_type")
			id := detID("referral:"+pyStr(uid)+":"+pyStr(at), 16)
			rec := pyjson.NewObject("referral_id", id, "referrer_id", uid, "referred_account_type", at,
				"referral_status", "NO_PROGRESS", "date", todayStr)
			if !db.addToDB("referrals", id, rec) {
				return fmt.Sprintf("Failed to submit referral: Record ID '%s' may already exist.", id), nil
			}
			return fmt.Sprintf("Referral request submitted successfully!\n  - Referral ID: %s\n  - Referrer ID: %s\n  - Account Type: %s\n  - Status: NO_PROGRESS\n  - Date: %s\n\nShare your referral ID with the person you're referring. They will need to use this when applying for their account.",
				id, pyStr(uid), pyStr(at), todayStr), nil
		}),
		tool("call_discoverable_user_tool", m, callDiscoverableUserTool),
		tool("list_discoverable_user_tools", m, func(db *DB, a *env.Args) (any, error) {
			res := db.queryTool("user_discoverable_tools", "{}")
			if strings.Contains(res, "No results found") {
				return "No tools have been given to you yet by the agent.", nil
			}
			return "Tools given to you by the agent:\n" + res, nil
		}),
		tool("request_human_agent_transfer", m, func(db *DB, a *env.Args) (any, error) {
			existing := db.queryTool("human_transfer_requests", "{}")
			n := 1
			if !strings.Contains(existing, "No records found") && !strings.Contains(existing, "No results found") {
				n = strings.Count(existing, "request_id") + 1
			}
			id := fmt.Sprintf("transfer_request_%d", n)
			db.addToDB("human_transfer_requests", id, pyjson.NewObject("request_id", id,
				"request_number", int64(n), "requested_at", todayStr, "status", "PENDING"))
			return fmt.Sprintf("Transfer request #%d submitted.\nThe agent will process your request.", n), nil
		}),
		tool("submit_transaction", m, submitTransaction),
	}
}

func submitTransaction(db *DB, a *env.Args) (any, error) {
	ct := a.Raw("credit_card_type")
	cts, _ := ct.(string)
	idx := slices.IndexFunc(creditCardRewards, func(c struct {
		card  string
		rates []rewardRate
	}) bool {
		return c.card == cts
	})
	if idx < 0 {
		cards := make([]string, len(creditCardRewards))
		for i, c := range creditCardRewards {
			cards[i] = c.card
		}
		return fmt.Sprintf("Error: Unknown credit card type '%s'. Available types: %s", pyStr(ct), pyListRepr(cards)), nil
	}
	uid, merchant, cat := a.Raw("user_id"), a.Raw("merchant_name"), a.Raw("category")
	amt, ok := num(a.Raw("amount"))
	if _, isBool := a.Raw("amount").(bool); !ok || isBool {
		return nil, fmt.Errorf("Unknown format code 'f' for object of type '%s'", pyjson.TypeName(a.Raw("amount")))
	}
	seed := strings.Join([]string{"transaction", pyStr(uid), cts, pyStr(merchant), fmt2(amt), pyStr(cat)}, ":")
	id := "txn_" + detID(seed, 12)
	rates := creditCardRewards[idx].rates
	rate := rates[len(rates)-1].rate
	for _, r := range rates {
		if cs, ok := cat.(string); ok && r.cat == cs {
			rate = r.rate
		}
	}
	points := pyInt(amt * rate)
	rec := pyjson.NewObject("transaction_id", id, "user_id", uid, "credit_card_type", cts,
		"merchant_name", merchant, "transaction_amount", "$"+fmt2(amt), "transaction_date", todayStr,
		"category", cat, "status", "COMPLETED", "rewards_earned", strconv.FormatFloat(points, 'f', 0, 64)+" points")
	if !db.addToDB("credit_card_transaction_history", id, rec) {
		return fmt.Sprintf("Failed to submit transaction: Record ID '%s' may already exist.", id), nil
	}
	return fmt.Sprintf("Transaction submitted successfully!\n  - Transaction ID: %s\n  - User ID: %s\n  - Card Type: %s\n  - Merchant: %s\n  - Amount: $%s\n  - Category: %s\n  - Date: %s\n  - Rewards Earned: %s points (%s%% cashback rate)\n",
		id, pyStr(uid), cts, pyStr(merchant), fmt2(amt), pyStr(cat), todayStr, strconv.FormatFloat(points, 'f', 0, 64), floatRepr(rate)), nil
}

func callDiscoverableUserTool(db *DB, a *env.Args) (any, error) {
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
	v = floatInts(v)
	names, err := argNames(v)
	if err != nil {
		return nil, err
	}
	for _, p := range m.Params {
		if p[1] == nil && !slices.Contains(names, *p[0]) {
			return "Error: Missing required parameter: " + *p[0], nil
		}
	}
	for _, k := range names {
		if k != "self" && !slices.ContainsFunc(m.Params, func(p []*string) bool { return *p[0] == k }) {
			return "Error: Unexpected parameter: " + k, nil
		}
	}
	args, ok := v.(*pyjson.Object)
	if !ok {
		return fmt.Sprintf("Error: Invalid arguments for tool '%s': tau2.domains.banking_knowledge.tools.KnowledgeUserTools.%s() argument after ** must be a mapping, not %s", name, name, pyjson.TypeName(v)), nil
	}
	if args.Has("self") {
		return fmt.Sprintf("Error: Invalid arguments for tool '%s': KnowledgeUserTools.%s() got multiple values for argument 'self'", name, name), nil
	}
	res, err := userDiscoverable[name](db, args)
	var te *pyTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("Error: Invalid arguments for tool '%s': %s", name, te.msg), nil
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// checkToolGiven is KnowledgeUserTools._check_tool_given.
func (db *DB) checkToolGiven(name string) string {
	res := db.queryTool("user_discoverable_tools", byField("tool_name", name))
	if strings.Contains(res, "No records found") {
		return "Error: Tool '" + name + "' has not been given to you by the agent. The agent must first use `give_discoverable_user_tool` to give this tool to you."
	}
	return ""
}

// logUserToolCall is KnowledgeUserTools._log_user_tool_call.
func (db *DB) logUserToolCall(name string, args *pyjson.Object) error {
	sorted, err := pyjson.DumpsSorted(args)
	if err != nil {
		return err
	}
	id := detID("user_discoverable_tool_call:"+name+":"+sorted, 16)
	db.addToDB("user_discoverable_tool_calls", id, pyjson.NewObject("tool_name", name,
		"arguments", args, "called_at", todayStr, "status", "CALLED"))
	return nil
}
