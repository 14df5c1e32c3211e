package banking_knowledge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

// The user's discoverable tools (KnowledgeUserTools' @is_discoverable_tool
// methods), called through call_discoverable_user_tool after the agent gave
// them with give_discoverable_user_tool.
func init() {
	userDiscoverable["submit_cash_back_dispute_0589"] = submitCashBackDispute
	userDiscoverable["get_referral_link"] = getReferralLink
	userDiscoverable["get_card_last_4_digits"] = getCardLast4
	userDiscoverable["deposit_check_3847"] = depositCheck
}

func get(a *pyjson.Object, k string) any { v, _ := a.Get(k); return v }

func submitCashBackDispute(db *DB, a *pyjson.Object) (string, error) {
	const name = "submit_cash_back_dispute_0589"
	if e := db.checkToolGiven(name); e != "" {
		return e, nil
	}
	uid, tid := get(a, "user_id"), get(a, "transaction_id")
	args := pyjson.NewObject("user_id", uid, "transaction_id", tid)
	if err := db.logUserToolCall(name, args); err != nil {
		return "", err
	}
	id := "dsp_" + detID("dispute:"+pyStr(uid)+":"+pyStr(tid), 12)
	auto := false
	if db.TaskConfig.Data.Len() > 0 {
		if cfg, ok := db.TaskConfig.Data.Get("dispute_settings"); ok {
			v, _ := cfg.Get("auto_resolve_disputes")
			auto = truthy(v)
		}
	}
	rec := pyjson.NewObject("dispute_id", id, "user_id", uid, "transaction_id", tid, "submitted_at", todayStr)
	status := "Status: SUBMITTED - Your dispute has been queued for review."
	if auto {
		rec.Set("status", "RESOLVED")
		rec.Set("resolution", "APPROVED")
		status = "Status: RESOLVED - The dispute has been reviewed and approved. The transaction rewards need to be updated."
	} else {
		rec.Set("status", "SUBMITTED")
	}
	ok := db.addToDB("cash_back_disputes", id, rec)
	res := "Cash back dispute submitted successfully. Your case has been queued for review.\n\nExecuted: " + name + "\nArguments: " + dumpsIndent2(args) + "\n"
	if ok {
		return res + "Dispute ID: " + id + "\n" + status, nil
	}
	return res + "Note: Dispute may have already been submitted for this transaction.", nil
}

func getReferralLink(db *DB, a *pyjson.Object) (string, error) {
	const name = "get_referral_link"
	if e := db.checkToolGiven(name); e != "" {
		return e, nil
	}
	uid, card := get(a, "user_id"), get(a, "card_name")
	args := pyjson.NewObject("user_id", uid, "card_name", card)
	if err := db.logUserToolCall(name, args); err != nil {
		return "", err
	}
	id := detID("referral_link:"+pyStr(uid)+":"+pyStr(card), 16)
	ok := db.addToDB("referrals", id, pyjson.NewObject("referral_id", id, "referrer_id", uid,
		"referred_account_type", card, "referral_status", "NO_PROGRESS", "date", todayStr))
	res := "Referral link generated successfully. Share this link with the person you want to refer.\n\nExecuted: " + name + "\nArguments: " + dumpsIndent2(args) + "\n"
	if ok {
		return res + "Referral ID: " + id + "\nReferral link: https://rhobank.com/refer/" + id, nil
	}
	return res + "Note: A referral link for this card may have already been generated.", nil
}

func getCardLast4(db *DB, a *pyjson.Object) (string, error) {
	const name = "get_card_last_4_digits"
	if e := db.checkToolGiven(name); e != "" {
		return e, nil
	}
	id := get(a, "credit_card_account_id")
	args := pyjson.NewObject("credit_card_account_id", id)
	if err := db.logUserToolCall(name, args); err != nil {
		return "", err
	}
	res := db.queryTool("credit_card_accounts", byField("account_id", pyStr(id)))
	if strings.Contains(res, "No results found") || strings.Contains(res, "No records found") {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(id)), nil
	}
	h := sha256.Sum256([]byte("card_last4:" + pyStr(id)))
	last4 := ""
	for _, c := range hex.EncodeToString(h[:]) {
		if c >= '0' && c <= '9' {
			last4 += string(c)
			if len(last4) == 4 {
				break
			}
		}
	}
	for len(last4) < 4 {
		last4 += "0"
	}
	return "Card information retrieved successfully.\n\nExecuted: " + name + "\nArguments: " + dumpsIndent2(args) + "\nLast 4 digits of card: " + last4, nil
}

// parseBalance is _parse_balance / deposit_check's parse_balance.
func parseBalance(v any) (float64, error) {
	switch x := v.(type) {
	case int64, float64, int:
		f, _ := num(x)
		return f, nil
	case string:
		return pyFloat(strings.ReplaceAll(strings.ReplaceAll(x, "$", ""), ",", ""))
	}
	return 0, nil
}

// accountBalance is _get_account_balance: current_holdings, else balance, else 0.
func accountBalance(acc *pyjson.Object) (float64, error) {
	if v, ok := acc.Get("current_holdings"); ok {
		return parseBalance(v)
	}
	if v, ok := acc.Get("balance"); ok {
		return parseBalance(v)
	}
	return 0, nil
}

func depositCheck(db *DB, a *pyjson.Object) (string, error) {
	const name = "deposit_check_3847"
	if e := db.checkToolGiven(name); e != "" {
		return e, nil
	}
	accV, amtV := get(a, "account_id"), get(a, "check_amount")
	args := pyjson.NewObject("account_id", accV, "check_amount", amtV)
	if err := db.logUserToolCall(name, args); err != nil {
		return "", err
	}
	amt, err := pyFloat(amtV)
	if err != nil {
		return fmt.Sprintf("Error: Invalid check amount '%s'. Must be a number.", pyStr(amtV)), nil
	}
	if amt <= 0 {
		return "Error: Check amount must be positive.", nil
	}
	accID, _ := accV.(string)
	acc, ok := db.Accounts.Data.Get(accID)
	if !ok {
		return fmt.Sprintf("Error: Account '%s' not found.", pyStr(accV)), nil
	}
	if st, _ := acc.Get("status"); st != "ACTIVE" && st != "OPEN" {
		return fmt.Sprintf("Error: Account '%s' is not active.", accID), nil
	}
	cur, err := accountBalance(acc)
	if err != nil {
		return "", err
	}
	nb := cur + amt
	acc.Set("current_holdings", "$"+fmt2(nb))
	return "Check deposited successfully. Funds will be available according to your account's deposit policy.\n\nExecuted: " + name +
		"\nArguments: " + dumpsIndent2(args) + "\nCheck deposit processed!\n  - Account: " + accID +
		"\n  - Check Amount: $" + fmt2(amt) + "\n  - Previous Balance: $" + fmt2(cur) + "\n  - New Balance: $" + fmt2(nb), nil
}
