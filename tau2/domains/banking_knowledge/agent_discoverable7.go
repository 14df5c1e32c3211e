package banking_knowledge

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["log_credit_card_closure_reason_4521"] = logClosureReason
	agentDiscoverable["close_credit_card_account_7834"] = closeCreditCardAccount
	agentDiscoverable["pay_credit_card_from_checking_9182"] = payCreditCardFromChecking
}

var closureReasons = []string{"annual_fee", "not_using_card", "found_better_card", "unhappy_with_rewards",
	"simplifying_finances", "negative_experience", "other"}

func logClosureReason(db *DB, a *pyjson.Object) (string, error) {
	cc, uid, r := get(a, "credit_card_account_id"), get(a, "user_id"), get(a, "closure_reason")
	if !truthy(cc) || !truthy(uid) || !truthy(r) {
		return "Error: Missing required parameters.", nil
	}
	if !inStrs(r, closureReasons...) {
		return "Error: Invalid closure_reason. Must be one of: " + pyListRepr(closureReasons), nil
	}
	id := "clsr_" + detID("closure_reason:"+pyStr(cc)+":"+pyStr(uid), 12)
	db.addToDB("credit_card_closure_reasons", id, pyjson.NewObject("record_id", id, "credit_card_account_id", cc,
		"user_id", uid, "closure_reason", r, "logged_at", todayStr, "status", "LOGGED"))
	args := pyjson.NewObject("credit_card_account_id", cc, "user_id", uid, "closure_reason", r)
	return "Closure reason logged successfully.\n\nExecuted: log_credit_card_closure_reason_4521\nArguments: " + dumpsIndent2(args) +
		"\nClosure reason '" + pyStr(r) + "' logged for account " + pyStr(cc) + ".", nil
}

func closeCreditCardAccount(db *DB, a *pyjson.Object) (string, error) {
	cc, uid := get(a, "credit_card_account_id"), get(a, "user_id")
	if !truthy(cc) || !truthy(uid) {
		return "Error: Missing required parameters (credit_card_account_id, user_id).", nil
	}
	res := db.queryTool("credit_card_accounts", byField("account_id", pyStr(cc)))
	if strings.Contains(res, "No results found") || strings.Contains(res, "No records found") {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	ccID, _ := cc.(string)
	if _, ok := db.updateRecord("credit_card_accounts", ccID, "status", "CLOSED", "closed_date", todayStr, "closed_by", uid); !ok {
		return fmt.Sprintf("Error: Failed to close credit card account '%s'.", pyStr(cc)), nil
	}
	args := pyjson.NewObject("credit_card_account_id", cc, "user_id", uid)
	return "Credit card account closed successfully.\n\nExecuted: close_credit_card_account_7834\nArguments: " + dumpsIndent2(args) +
		"\nAccount " + pyStr(cc) + " has been closed.", nil
}

func payCreditCardFromChecking(db *DB, a *pyjson.Object) (string, error) {
	uid, chk, cc, amtV := get(a, "user_id"), get(a, "checking_account_id"), get(a, "credit_card_account_id"), get(a, "amount")
	if !truthy(uid) || !truthy(chk) || !truthy(cc) || amtV == nil {
		return "Error: Missing required parameters (user_id, checking_account_id, credit_card_account_id, amount).", nil
	}
	amt, err := pyFloat(amtV)
	if err != nil {
		return "Error: Invalid payment amount. Must be a positive number.", nil
	}
	if amt <= 0 {
		return "Error: Payment amount must be a positive number.", nil
	}
	acc, chkID, ok := db.accountByArg(chk)
	if !ok {
		return fmt.Sprintf("Error: Checking account '%s' not found.", pyStr(chk)), nil
	}
	if !pyEq(getOr(acc, "user_id", nil), uid) {
		return fmt.Sprintf("Error: Checking account '%s' does not belong to user '%s'.", chkID, pyStr(uid)), nil
	}
	if getOr(acc, "class", nil) != "checking" {
		return fmt.Sprintf("Error: Account '%s' is not a checking account.", chkID), nil
	}
	bal, err := accountBalance(acc)
	if err != nil {
		return "", err
	}
	if amt > bal {
		return fmt.Sprintf("Error: Insufficient funds in checking account. Available balance: $%s, requested payment: $%s.", fmt2(bal), fmt2(amt)), nil
	}
	ccAcc, ccID, ok := db.ccAccountByArg(cc)
	if !ok {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	if !pyEq(getOr(ccAcc, "user_id", nil), uid) {
		return fmt.Sprintf("Error: Credit card account '%s' does not belong to user '%s'.", ccID, pyStr(uid)), nil
	}
	ccBal, err := pyFloat(strings.ReplaceAll(strings.ReplaceAll(pyStr(getOr(ccAcc, "current_balance", "$0.00")), "$", ""), ",", ""))
	if err != nil {
		ccBal = 0
	}
	if amt > ccBal {
		return fmt.Sprintf("Error: Payment amount ($%s) exceeds credit card balance ($%s). Please specify an amount up to the outstanding balance.", fmt2(amt), fmt2(ccBal)), nil
	}
	nc, ncc := bal-amt, ccBal-amt
	acc.Set("current_holdings", fmt2(nc))
	ccAcc.Set("current_balance", "$"+fmt2(ncc))
	return fmt.Sprintf("Payment processed successfully!\n  - Payment Amount: $%s\n  - From Checking Account: %s\n  - To Credit Card Account: %s\n  - New Checking Balance: $%s\n  - New Credit Card Balance: $%s\nThe payment has been applied immediately.",
		fmt2(amt), chkID, ccID, fmt2(nc), fmt2(ncc)), nil
}
