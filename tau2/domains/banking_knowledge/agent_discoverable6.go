package banking_knowledge

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["approve_credit_limit_increase_5847"] = approveCLI
	agentDiscoverable["deny_credit_limit_increase_5848"] = denyCLI
}

// ccAccountByArg looks a credit card account up by an argument value.
func (db *DB) ccAccountByArg(v any) (*pyjson.Object, string, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, "", false
	}
	acc, ok := db.CreditCardAccounts.Data.Get(s)
	return acc, s, ok
}

func approveCLI(db *DB, a *pyjson.Object) (string, error) {
	cc, uid, nl := get(a, "credit_card_account_id"), get(a, "user_id"), get(a, "new_credit_limit")
	if !truthy(cc) || !truthy(uid) || nl == nil {
		return "Error: Missing required parameters.", nil
	}
	acc, ccID, ok := db.ccAccountByArg(cc)
	if !ok {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	if !pyEq(getOr(acc, "user_id", nil), uid) {
		return fmt.Sprintf("Error: Credit card account '%s' does not belong to user '%s'.", ccID, pyStr(uid)), nil
	}
	inelig := false
	for _, d := range db.TransactionDisputes.Data.All() {
		if pyEq(getOr(d, "user_id", nil), uid) && inStrs(getOr(d, "status", nil), "SUBMITTED", "UNDER_REVIEW", "PENDING") {
			inelig = true
			break
		}
	}
	if !inelig {
		for _, o := range db.CreditCardOrders.Data.All() {
			if pyEq(getOr(o, "credit_card_account_id", nil), ccID) && inStrs(getOr(o, "status", nil), "PENDING", "PROCESSING", "SHIPPED") {
				inelig = true
				break
			}
		}
	}
	if !inelig {
		st, err := strMethod(getOr(acc, "account_status", ""), "upper")
		if err != nil {
			return "", err
		}
		inelig = inStrs(strings.ToUpper(st), "PAST_DUE", "DELINQUENT", "COLLECTIONS", "CLOSED")
	}
	if inelig {
		return "Error: Credit limit increase request cannot be approved at this time.", nil
	}
	cur, err := pyFloat(strings.ReplaceAll(strings.ReplaceAll(pyStr(getOr(acc, "credit_limit", "$0.00")), "$", ""), ",", ""))
	if err != nil {
		cur = 0
	}
	newLimit, err := pyFloat(nl)
	if err != nil {
		return "", err
	}
	acc.Set("credit_limit", "$"+fmt2(newLimit))
	inc := newLimit - cur
	id := "cli_" + detID("cli_request:"+ccID+":"+pyStr(uid)+":"+fmt2(inc), 12)
	db.addToDB("credit_limit_increase_requests", id, pyjson.NewObject("request_id", id, "credit_card_account_id", ccID,
		"user_id", uid, "previous_limit", "$"+fmt2(cur), "new_limit", "$"+fmt2(newLimit), "increase_amount", "$"+fmt2(inc),
		"decision_date", todayStr, "status", "APPROVED"))
	return fmt.Sprintf("Credit limit increase approved!\n  - Account: %s\n  - Previous Limit: $%s\n  - New Limit: $%s\n  - Increase: $%s\n  - Effective Date: %s\nThe customer will receive a confirmation email.",
		ccID, fmt2(cur), fmt2(newLimit), fmt2(inc), todayStr), nil
}

var denialReasons = []string{"insufficient_account_age", "cooldown_period_active", "pending_disputes",
	"pending_replacement_card", "past_due_balance", "high_utilization", "insufficient_payment_history",
	"requested_amount_exceeds_limit", "other"}

func denyCLI(db *DB, a *pyjson.Object) (string, error) {
	cc, uid, r := get(a, "credit_card_account_id"), get(a, "user_id"), get(a, "denial_reason")
	if !truthy(cc) || !truthy(uid) || !truthy(r) {
		return "Error: Missing required parameters.", nil
	}
	if !inStrs(r, denialReasons...) {
		return "Error: Invalid denial_reason. Must be one of: " + strings.Join(denialReasons, ", "), nil
	}
	_, ccID, ok := db.ccAccountByArg(cc)
	if !ok {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	id := "cli_" + detID("cli_request:"+ccID+":"+pyStr(uid)+":0.00", 12)
	db.addToDB("credit_limit_increase_requests", id, pyjson.NewObject("request_id", id, "credit_card_account_id", ccID,
		"user_id", uid, "denial_reason", r, "decision_date", todayStr, "status", "DENIED"))
	return fmt.Sprintf("Credit limit increase request denied.\n  - Account: %s\n  - Denial Reason: %s\n  - Date: %s\nThe customer will receive a notification explaining the denial.",
		ccID, pyStr(r), todayStr), nil
}
