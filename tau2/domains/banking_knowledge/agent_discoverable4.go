package banking_knowledge

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	for name, f := range map[string]discoverableFunc{
		"apply_checking_account_credit_5829": applyAccountCredit("checking"),
		"apply_savings_account_credit_6831":  applyAccountCredit("savings"),
		"close_debit_card_4721":              closeDebitCard,
		"order_replacement_credit_card_7291": orderReplacementCreditCard,
	} {
		agentDiscoverable[name] = f
	}
}

// applyAccountCredit is apply_checking_account_credit_5829 ("checking") and
// apply_savings_account_credit_6831 ("savings"); they differ in the credit
// types, the class check, the balance format and the descriptions.
func applyAccountCredit(kind string) discoverableFunc {
	return func(db *DB, a *pyjson.Object) (string, error) {
		v, amtV, ct := get(a, "account_id"), get(a, "amount"), get(a, "credit_type")
		if !truthy(v) || amtV == nil || !truthy(ct) {
			return "Error: Missing required parameters.", nil
		}
		amt, err := pyFloat(amtV)
		if err != nil {
			return "Error: Invalid credit amount. Must be a number.", nil
		}
		if amt <= 0 {
			return "Error: Credit amount must be positive.", nil
		}
		valid := []string{"rebate_credit", "fee_refund"}
		if kind == "savings" {
			valid = []string{"interest_correction", "fee_refund", "goodwill_credit"}
		}
		if !inStrs(ct, valid...) {
			return "Error: Invalid credit_type. Must be one of: " + pyListRepr(valid), nil
		}
		acc, id, ok := db.accountByArg(v)
		if !ok {
			return fmt.Sprintf("Error: Account '%s' not found.", pyStr(v)), nil
		}
		cls, err := strMethod(getOr(acc, "class", ""), "lower")
		if err != nil {
			return "", err
		}
		cls = pyjson.Lower(cls)
		if kind == "checking" && cls != "checking" {
			return fmt.Sprintf("Error: Account '%s' is not a checking account. Credits can only be applied to checking accounts.", id), nil
		}
		if kind == "savings" && cls != "saving" && cls != "savings" {
			return fmt.Sprintf("Error: Account '%s' is not a savings account. This tool only applies to savings accounts.", id), nil
		}
		if !inStrs(getOr(acc, "status", nil), "ACTIVE", "OPEN") {
			return fmt.Sprintf("Error: Account '%s' is not active.", id), nil
		}
		cur, err := accountBalance(acc)
		if err != nil {
			return "", err
		}
		nb := cur + amt
		if kind == "checking" {
			acc.Set("current_holdings", "$"+fmt2(nb))
		} else {
			acc.Set("current_holdings", fmt2(nb))
		}
		cts := ct.(string)
		txid := "txn_" + detID(kind+"_credit:"+id+":"+cts+":"+floatRepr(amt)+":"+todayStr, 16)
		desc := map[string]string{"rebate_credit": "REBATE CREDIT - CUSTOMER SERVICE", "fee_refund": "FEE REFUND - CUSTOMER SERVICE",
			"interest_correction": "INTEREST CORRECTION - CUSTOMER SERVICE", "goodwill_credit": "GOODWILL CREDIT - CUSTOMER SERVICE"}[cts]
		db.BankAccountTransactionHist.Data.Set(txid, pyjson.NewObject("transaction_id", txid, "account_id", id,
			"date", todayStr, "description", desc, "amount", amt, "type", cts, "status", "posted"))
		return fmt.Sprintf("\nCredit applied successfully!\n  - Transaction ID: %s\n  - Account: %s\n  - Credit Type: %s\n  - Amount: $%s\n  - Previous Balance: $%s\n  - New Balance: $%s",
			txid, id, cts, fmt2(amt), fmt2(cur), fmt2(nb)), nil
	}
}

func closeDebitCard(db *DB, a *pyjson.Object) (string, error) {
	v, rv := get(a, "card_id"), get(a, "reason")
	if !truthy(v) || !truthy(rv) {
		return "Error: Missing required parameters. Required: card_id, reason.", nil
	}
	valid := []string{"lost", "stolen", "fraud_suspected", "damaged", "no_longer_needed", "account_closing"}
	rs, err := strMethod(rv, "lower")
	if err != nil {
		return "", err
	}
	reason := pyjson.Lower(rs)
	if !inStrs(reason, valid...) {
		return "Error: Invalid reason. Must be one of: " + pyListRepr(valid), nil
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	prev := getOr(card, "status", nil)
	if !inStrs(prev, "ACTIVE", "PENDING") {
		return fmt.Sprintf("Error: Debit card '%s' cannot be closed. Current status: %s. Only ACTIVE or PENDING cards can be closed.", id, pyStr(prev)), nil
	}
	card.Set("status", "CLOSED")
	card.Set("closed_date", todayStr)
	card.Set("closure_reason", reason)
	parts := []string{"Debit Card Closed Successfully", "Card ID: " + id, "Previous Status: " + pyStr(prev),
		"New Status: CLOSED", "Closure Reason: " + pyTitle(strings.ReplaceAll(reason, "_", " ")), "Closure Date: " + todayStr, ""}
	if inStrs(reason, "lost", "stolen", "fraud_suspected") {
		parts = append(parts, "IMPORTANT: This card has been immediately deactivated for security.", "Any pending transactions may still be processed.")
		if reason == "fraud_suspected" {
			parts = append(parts, "Please advise the customer to review recent transactions and file disputes for any unauthorized charges.",
				"Also recommend changing their online banking password.")
		}
	}
	parts = append(parts, "", "Note: This card cannot be reactivated. If the customer needs a new card, they can order one through the standard ordering process.",
		"Any recurring payments linked to this card will need to be updated with new payment information.")
	return strings.Join(parts, "\n"), nil
}

func orderReplacementCreditCard(db *DB, a *pyjson.Object) (string, error) {
	cc, uid, addr, reason := get(a, "credit_card_account_id"), get(a, "user_id"), get(a, "shipping_address"), get(a, "reason")
	exp := getOr(a, "expedited_shipping", false)
	if !truthy(cc) || !truthy(uid) || !truthy(addr) || !truthy(reason) {
		return "Error: Missing required parameters (credit_card_account_id, user_id, shipping_address, reason).", nil
	}
	valid := []string{"fraud_suspected", "lost", "stolen", "damaged", "expired", "other"}
	if !inStrs(reason, valid...) {
		return "Error: Invalid reason. Must be one of: " + pyListRepr(valid), nil
	}
	res := db.queryTool("credit_card_accounts", byField("account_id", pyStr(cc)))
	if strings.Contains(res, "No results found") || strings.Contains(res, "No records found") {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	rs := reason.(string)
	id := "ccord_" + detID("credit_card_order:"+pyStr(cc)+":"+pyStr(uid)+":"+rs, 12)
	rec := pyjson.NewObject("order_id", id, "credit_card_account_id", cc, "user_id", uid, "shipping_address", addr,
		"reason", rs, "expedited_shipping", exp, "order_date", todayStr, "status", "ORDERED", "old_card_cancelled", true)
	if !db.addToDB("credit_card_orders", id, rec) {
		return "Error: Order may have already been placed for this card replacement.", nil
	}
	if s, ok := cc.(string); ok {
		if acc, ok := db.CreditCardAccounts.Data.Get(s); ok {
			acc.Set("status", "CLOSED")
			acc.Set("closed_date", todayStr)
		}
	}
	method, delivery := "Standard", "7-10 business days"
	if truthy(exp) {
		method, delivery = "Expedited", "2-3 business days"
	}
	return strings.Join([]string{"Order ID: " + id, "Card Account: " + pyStr(cc),
		"Reason: " + pyTitle(strings.ReplaceAll(rs, "_", " ")), "Shipping Address: " + pyStr(addr),
		"Shipping Method: " + method, "Expected Delivery: " + delivery, "",
		"The old card has been cancelled for security. The new card will have the same account number but a new card number and CVV."}, "\n"), nil
}
