package banking_knowledge

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["apply_statement_credit_8472"] = applyStatementCredit
	agentDiscoverable["apply_credit_card_account_flag_6147"] = applyAccountFlag
}

var statementCreditReasons = []string{"goodwill_adjustment", "promotional_credit", "annual_fee_reversal",
	"late_fee_reversal", "interest_charge_reversal", "dispute_resolution", "price_match",
	"retention_offer", "error_correction", "other"}

// ccAccountQueried is the "verify the credit card account exists" query of
// several tools (an f-string query on account_id).
func (db *DB) ccAccountMissing(cc any) bool {
	res := db.queryTool("credit_card_accounts", byField("account_id", pyStr(cc)))
	return strings.Contains(res, "No results found") || strings.Contains(res, "No records found")
}

func applyStatementCredit(db *DB, a *pyjson.Object) (string, error) {
	uid, cc, amtV, r := get(a, "user_id"), get(a, "credit_card_account_id"), get(a, "amount"), get(a, "reason")
	if !truthy(uid) || !truthy(cc) || amtV == nil || !truthy(r) {
		return "Error: Missing required parameters (user_id, credit_card_account_id, amount, reason).", nil
	}
	c, ok := pyCompare(amtV, 0.0)
	if !ok {
		return "", typeErrorf("'<=' not supported between instances of '%s' and 'int'", pyjson.TypeName(amtV))
	}
	if c <= 0 {
		return "Error: Credit amount must be positive.", nil
	}
	if !inStrs(r, statementCreditReasons...) {
		return "Error: Invalid reason. Must be one of: " + pyListRepr(statementCreditReasons), nil
	}
	if db.ccAccountMissing(cc) {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	amt, _ := num(amtV)
	rs := r.(string)
	id := "txn_" + detID(strings.Join([]string{"transaction", pyStr(uid), "STATEMENT_CREDIT", rs, fmt2(amt), "Statement Credit"}, ":"), 12)
	rec := pyjson.NewObject("transaction_id", id, "user_id", uid, "credit_card_account_id", cc,
		"credit_card_type", "N/A", "merchant_name", "Rho-Bank Statement Credit", "transaction_amount", "-$"+fmt2(amt),
		"transaction_date", todayStr, "category", "Statement Credit", "status", "COMPLETED",
		"rewards_earned", "0 points", "credit_reason", rs)
	if !db.addToDB("credit_card_transaction_history", id, rec) {
		return fmt.Sprintf("Error: Failed to apply statement credit. Transaction ID '%s' may already exist.", id), nil
	}
	return fmt.Sprintf("Statement credit applied successfully.\n\nExecuted: apply_statement_credit_8472\n  - Transaction ID: %s\n  - User ID: %s\n  - Account: %s\n  - Credit Amount: $%s\n  - Reason: %s\n  - Date: %s",
		id, pyStr(uid), pyStr(cc), fmt2(amt), pyTitle(strings.ReplaceAll(rs, "_", " ")), todayStr), nil
}

var (
	flagTypes   = []string{"annual_fee_waived", "promotional_apr", "rewards_bonus", "other"}
	flagReasons = []string{"retention_offer", "loyalty_benefit", "promotional", "error_correction", "other"}
)

func applyAccountFlag(db *DB, a *pyjson.Object) (string, error) {
	cc, uid, ft, exp, r := get(a, "credit_card_account_id"), get(a, "user_id"), get(a, "flag_type"), get(a, "expiration_date"), get(a, "reason")
	if !truthy(cc) || !truthy(uid) || !truthy(ft) || !truthy(exp) || !truthy(r) {
		return "Error: Missing required parameters (credit_card_account_id, user_id, flag_type, expiration_date, reason).", nil
	}
	if !inStrs(ft, flagTypes...) {
		return "Error: Invalid flag_type. Must be one of: " + pyListRepr(flagTypes), nil
	}
	if !inStrs(r, flagReasons...) {
		return "Error: Invalid reason. Must be one of: " + pyListRepr(flagReasons), nil
	}
	if db.ccAccountMissing(cc) {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	fts, rs := ft.(string), r.(string)
	id := "ccflag_" + detID("account_flag:"+pyStr(cc)+":"+fts+":"+pyStr(exp), 12)
	rec := pyjson.NewObject("flag_id", id, "credit_card_account_id", cc, "user_id", uid, "flag_type", fts,
		"effective_date", todayStr, "expiration_date", exp, "reason", rs, "applied_at", todayStr, "status", "ACTIVE")
	if !db.addToDB("credit_card_account_flags", id, rec) {
		return fmt.Sprintf("Error: Failed to apply account flag. Flag ID '%s' may already exist.", id), nil
	}
	return fmt.Sprintf("Account flag applied successfully!\n  - Flag ID: %s\n  - Account: %s\n  - User ID: %s\n  - Flag Type: %s\n  - Effective Date: %s\n  - Expiration Date: %s\n  - Reason: %s",
		id, pyStr(cc), pyStr(uid), pyTitle(strings.ReplaceAll(fts, "_", " ")), todayStr, pyStr(exp), pyTitle(strings.ReplaceAll(rs, "_", " "))), nil
}
