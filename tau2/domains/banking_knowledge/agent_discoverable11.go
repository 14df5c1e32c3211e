package banking_knowledge

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["clear_debit_card_fraud_alert_4892"] = clearFraudAlert
	agentDiscoverable["reset_debit_card_pin_6284"] = resetPIN
	agentDiscoverable["change_debit_card_pin_6285"] = changePIN
}

func clearFraudAlert(db *DB, a *pyjson.Object) (string, error) {
	v, r := get(a, "card_id"), get(a, "reason")
	if !truthy(v) {
		return "Error: Missing required parameter: card_id.", nil
	}
	if !truthy(r) {
		return "Error: Missing required parameter: reason.", nil
	}
	if !inStrs(r, "customer_verified", "velocity_clear") {
		return fmt.Sprintf("Error: Invalid reason '%s'. Must be one of: customer_verified, velocity_clear", pyStr(r)), nil
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	if r == "velocity_clear" {
		if !truthy(getOr(card, "velocity_blocked", false)) {
			return fmt.Sprintf("Error: Debit card '%s' does not have an active velocity block.", id), nil
		}
		card.Set("velocity_blocked", false)
		card.Set("velocity_cleared_date", todayStr)
		return strings.Join([]string{"Velocity Block Cleared Successfully", "Card ID: " + id, "Cleared Date: " + todayStr, "",
			"The card is now unblocked and ready for normal use.",
			"The velocity monitoring will continue - if the same unusual patterns recur,",
			"the card may be blocked again automatically."}, "\n"), nil
	}
	if !truthy(getOr(card, "fraud_alert_active", false)) {
		return fmt.Sprintf("Error: Debit card '%s' does not have an active fraud alert.", id), nil
	}
	if getOr(card, "alert_source", nil) == "bank_initiated" {
		return "Error: BANK_INITIATED_ALERT - This fraud alert was initiated by the bank's fraud detection system and cannot be cleared by customer service agents. Please transfer the customer to the security team using transfer_to_human_agents.", nil
	}
	card.Set("fraud_alert_active", false)
	card.Set("alert_source", nil)
	card.Set("fraud_alert_cleared_date", todayStr)
	return strings.Join([]string{"Fraud Alert Cleared Successfully", "Card ID: " + id, "Cleared Date: " + todayStr, "",
		"The fraud alert has been removed from the card.", "All transactions will process normally.", "",
		"Remind the customer to review recent transactions and report any unauthorized charges."}, "\n"), nil
}

// fourDigits is `s.isdigit() and len(s) == 4` on an argument (AttributeError for a non-str).
func fourDigits(v any) (bool, error) {
	s, err := strOf(v, "isdigit")
	if err != nil {
		return false, err
	}
	return pyIsDigit(s) && utf8.RuneCountInString(s) == 4, nil
}

func resetPIN(db *DB, a *pyjson.Object) (string, error) {
	v, l4, pin := get(a, "card_id"), get(a, "last_4_digits"), get(a, "new_pin")
	if !truthy(v) || !truthy(l4) || !truthy(pin) {
		return "Error: Missing required parameters. Required: card_id, last_4_digits, new_pin.", nil
	}
	if ok, err := fourDigits(l4); err != nil || !ok {
		return "Error: Last 4 digits must be exactly 4 digits.", err
	}
	if msg, err := validatePIN(pin); err != nil || msg != "" {
		return "Error: " + msg, err
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	if !pyEq(getOr(card, "last_4_digits", nil), l4) {
		return "Error: Card verification failed. The last 4 digits do not match our records.", nil
	}
	if st := getOr(card, "status", nil); st != "ACTIVE" {
		return fmt.Sprintf("Error: Cannot reset PIN. Card status is %s. Only ACTIVE cards can have their PIN reset.", pyStr(st)), nil
	}
	card.Set("pin_last_changed", todayStr)
	card.Set("pin_locked", false)
	card.Set("pin_attempts_remaining", int64(3))
	return strings.Join([]string{"Debit Card PIN Reset Successfully", "Card ID: " + id, "PIN Changed: " + todayStr, "",
		"The new PIN is effective immediately.", "Your card has been unlocked and is ready to use.",
		"Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.", "",
		"Security reminder: Never share your PIN with anyone."}, "\n"), nil
}

func changePIN(db *DB, a *pyjson.Object) (string, error) {
	v, cur, pin := get(a, "card_id"), get(a, "current_pin"), get(a, "new_pin")
	if !truthy(v) || !truthy(cur) || !truthy(pin) {
		return "Error: Missing required parameters. Required: card_id, current_pin, new_pin.", nil
	}
	if ok, err := fourDigits(cur); err != nil || !ok {
		return "Error: Current PIN must be exactly 4 digits.", err
	}
	if msg, err := validatePIN(pin); err != nil || msg != "" {
		return "Error: " + msg, err
	}
	if pyEq(cur, pin) {
		return "Error: New PIN must be different from current PIN.", nil
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	if st := getOr(card, "status", nil); st != "ACTIVE" {
		return fmt.Sprintf("Error: Cannot change PIN. Card status is %s. Only ACTIVE cards can have their PIN changed.", pyStr(st)), nil
	}
	card.Set("pin_last_changed", todayStr)
	return strings.Join([]string{"Debit Card PIN Changed Successfully", "Card ID: " + id, "PIN Changed: " + todayStr, "",
		"The new PIN is effective immediately.",
		"Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.", "",
		"Security reminder: Never share your PIN with anyone."}, "\n"), nil
}
