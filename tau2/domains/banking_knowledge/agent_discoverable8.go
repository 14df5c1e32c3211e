package banking_knowledge

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["transfer_funds_between_bank_accounts_7291"] = transferFunds
	agentDiscoverable["set_debit_card_recurring_block_7382"] = setRecurringBlock
	agentDiscoverable["get_debit_dispute_status_7483"] = queryListing("user_id", "debit_card_disputes", "user_id",
		"Debit card dispute history retrieved successfully.", "get_debit_dispute_status_7483",
		"Debit card dispute history for user %s:", "\nNo debit card disputes found for this user.")
}

func transferFunds(db *DB, a *pyjson.Object) (string, error) {
	src, dst, amtV := get(a, "source_account_id"), get(a, "destination_account_id"), get(a, "amount")
	if !truthy(src) || !truthy(dst) || amtV == nil {
		return "Error: Missing required parameters (source_account_id, destination_account_id, amount).", nil
	}
	amt, err := pyFloat(amtV)
	if err != nil {
		return fmt.Sprintf("Error: Invalid amount '%s'. Must be a number.", pyStr(amtV)), nil
	}
	if amt <= 0 {
		return "Error: Transfer amount must be positive.", nil
	}
	if pyEq(src, dst) {
		return "Error: Source and destination accounts cannot be the same.", nil
	}
	s, sID, ok := db.accountByArg(src)
	if !ok {
		return fmt.Sprintf("Error: Source account '%s' not found.", pyStr(src)), nil
	}
	d, dID, ok := db.accountByArg(dst)
	if !ok {
		return fmt.Sprintf("Error: Destination account '%s' not found.", pyStr(dst)), nil
	}
	if !inStrs(getOr(s, "status", nil), "ACTIVE", "OPEN") {
		return fmt.Sprintf("Error: Source account '%s' is not active.", sID), nil
	}
	if !inStrs(getOr(d, "status", nil), "ACTIVE", "OPEN") {
		return fmt.Sprintf("Error: Destination account '%s' is not active.", dID), nil
	}
	sb, err := accountBalance(s)
	if err != nil {
		return "", err
	}
	if sb < amt {
		return fmt.Sprintf("Error: Insufficient funds. Source account balance is $%s, but transfer amount is $%s.", fmt2(sb), fmt2(amt)), nil
	}
	dbal, err := accountBalance(d)
	if err != nil {
		return "", err
	}
	ns, nd := sb-amt, dbal+amt
	s.Set("current_holdings", "$"+fmt2(ns))
	d.Set("current_holdings", "$"+fmt2(nd))
	return fmt.Sprintf("Transfer completed successfully!\n  - Amount: $%s\n  - From: %s (new balance: $%s)\n  - To: %s (new balance: $%s)",
		fmt2(amt), sID, fmt2(ns), dID, fmt2(nd)), nil
}

func setRecurringBlock(db *DB, a *pyjson.Object) (string, error) {
	v, block := get(a, "card_id"), get(a, "block_recurring")
	if !truthy(v) {
		return "Error: Missing required parameter: card_id", nil
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok || card.Len() == 0 {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	st, err := strMethod(getOr(card, "status", ""), "upper")
	if err != nil {
		return "", err
	}
	st = strings.ToUpper(st)
	if st != "ACTIVE" {
		return fmt.Sprintf("Error: Cannot update recurring block settings for a card with status '%s'. Card must be ACTIVE.", st), nil
	}
	card.Set("recurring_blocked", block)
	if truthy(block) {
		return "Recurring payments BLOCKED for debit card " + id + ".\nAll recurring/subscription charges will be declined.\nOne-time purchases are not affected.\nThis change takes effect within 24 hours.", nil
	}
	return "Recurring payments UNBLOCKED for debit card " + id + ".\nRecurring/subscription charges will now be allowed.\nThis change takes effect within 24 hours.", nil
}
