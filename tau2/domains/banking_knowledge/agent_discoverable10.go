package banking_knowledge

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["activate_debit_card_8291"] = activateDebitCard(activateNew)
	agentDiscoverable["activate_debit_card_8292"] = activateDebitCard(activateReplacement)
	agentDiscoverable["activate_debit_card_8293"] = activateDebitCard(activateReissue)
}

// pyIsDigit is Python's str.isdigit(): non-empty and every character a
// digit (Unicode Nd, plus the superscript and circled digits Python also
// counts, approximated by unicode.IsDigit and the No category's digits).
func pyIsDigit(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsDigit(r) && !strings.ContainsRune("²³¹⁰⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉", r) {
			return false
		}
	}
	return true
}

// strOf is the value as a str for a str method, or Python's AttributeError.
func strOf(v any, method string) (string, error) { return strMethod(v, method) }

var sequentialPINs = []string{"0123", "1234", "2345", "3456", "4567", "5678", "6789",
	"9876", "8765", "7654", "6543", "5432", "4321", "3210"}

// validatePIN is _validate_pin ("" when valid).
func validatePIN(pin any) (string, error) {
	if !truthy(pin) {
		return "PIN must be exactly 4 digits.", nil
	}
	s, err := strOf(pin, "isdigit")
	if err != nil {
		return "", err
	}
	if !pyIsDigit(s) || utf8.RuneCountInString(s) != 4 {
		return "PIN must be exactly 4 digits.", nil
	}
	if slices.Contains(sequentialPINs, s) {
		return "PIN cannot be sequential (e.g., 1234). Please choose a more secure PIN.", nil
	}
	r, _ := utf8.DecodeRuneInString(s)
	if strings.Count(s, string(r)) == 4 {
		return "PIN cannot be all the same digit (e.g., 1111). Please choose a more secure PIN.", nil
	}
	return "", nil
}

var activationToolFor = map[string]string{
	"new_account": "activate_debit_card_8291", "first_card": "activate_debit_card_8291",
	"lost": "activate_debit_card_8292", "stolen": "activate_debit_card_8292", "fraud": "activate_debit_card_8292",
	"expired": "activate_debit_card_8293", "damaged": "activate_debit_card_8293",
	"upgrade": "activate_debit_card_8293", "bank_reissue": "activate_debit_card_8293",
}

// validateActivation is _validate_activation_common.
func (db *DB) validateActivation(a *pyjson.Object, allowed []string, tool string) (string, *pyjson.Object, error) {
	cardV, l4, exp, cvv, pin := get(a, "card_id"), get(a, "last_4_digits"), get(a, "expiration_date"), get(a, "cvv"), get(a, "pin")
	if !truthy(cardV) || !truthy(l4) || !truthy(exp) || !truthy(cvv) || !truthy(pin) {
		return "Error: Missing required parameters. Required: card_id, last_4_digits, expiration_date, cvv, pin.", nil, nil
	}
	if msg, err := validatePIN(pin); err != nil || msg != "" {
		if msg != "" {
			msg = "Error: " + msg
		}
		return msg, nil, err
	}
	cs, err := strOf(cvv, "isdigit")
	if err != nil {
		return "", nil, err
	}
	if !pyIsDigit(cs) || utf8.RuneCountInString(cs) != 3 {
		return "Error: CVV must be exactly 3 digits.", nil, nil
	}
	ls, err := strOf(l4, "isdigit")
	if err != nil {
		return "", nil, err
	}
	if !pyIsDigit(ls) || utf8.RuneCountInString(ls) != 4 {
		return "Error: Last 4 digits must be exactly 4 digits.", nil, nil
	}
	card, id, ok := db.debitCardByArg(cardV)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(cardV)), nil, nil
	}
	reason := getOr(card, "issue_reason", "new_account")
	if !inStrs(reason, allowed...) {
		rs, _ := reason.(string)
		correct, ok := activationToolFor[rs]
		if !ok {
			correct = "unknown"
		}
		return fmt.Sprintf("Error: Wrong activation tool. This card has issue_reason='%s'. Please use %s instead of %s.", pyStr(reason), correct, tool), nil, nil
	}
	st := getOr(card, "status", nil)
	if st == "ACTIVE" {
		return fmt.Sprintf("Error: Debit card '%s' is already active.", id), nil, nil
	}
	if st != "PENDING" {
		return fmt.Sprintf("Error: Debit card '%s' cannot be activated. Current status: %s. Only PENDING cards can be activated.", id, pyStr(st)), nil, nil
	}
	if !pyEq(getOr(card, "last_4_digits", nil), l4) {
		return "Error: Card verification failed. The last 4 digits do not match our records.", nil, nil
	}
	if accID, bad := db.linkedAccountNotOpen(card); bad {
		return fmt.Sprintf("Error: The linked checking account '%s' is no longer open. Card cannot be activated.", accID), nil, nil
	}
	return "", card, nil
}

type activationKind int

const (
	activateNew activationKind = iota
	activateReplacement
	activateReissue
)

func activateDebitCard(kind activationKind) discoverableFunc {
	allowed := [][]string{{"new_account", "first_card"}, {"lost", "stolen", "fraud"}, {"expired", "damaged", "upgrade", "bank_reissue"}}[kind]
	tool := []string{"activate_debit_card_8291", "activate_debit_card_8292", "activate_debit_card_8293"}[kind]
	return func(db *DB, a *pyjson.Object) (string, error) {
		msg, card, err := db.validateActivation(a, allowed, tool)
		if err != nil || msg != "" {
			return msg, err
		}
		id := get(a, "card_id").(string)
		accID := getOr(card, "account_id", nil)
		reason := getOr(card, "issue_reason", []string{"", "lost", "expired"}[kind])
		card.Set("status", "ACTIVE")
		card.Set("activated_date", todayStr)
		var others []string
		for oid, o := range db.DebitCards.Data.All() {
			if oid == id || !pyEq(getOr(o, "account_id", nil), accID) || getOr(o, "status", nil) != "ACTIVE" {
				continue
			}
			switch kind {
			case activateNew:
				o.Set("status", "DEACTIVATED")
				o.Set("deactivated_date", todayStr)
				o.Set("deactivation_reason", "New card activated")
			case activateReplacement:
				o.Set("status", "DEACTIVATED")
				o.Set("deactivated_date", todayStr)
				o.Set("deactivation_reason", "Replacement card activated ("+pyStr(reason)+")")
			case activateReissue:
				o.Set("status", "GRACE_PERIOD")
				o.Set("grace_period_ends", todayStr)
				o.Set("deactivation_reason", "Reissued card activated ("+pyStr(reason)+")")
			}
			others = append(others, oid)
		}
		title := func() (string, error) {
			s, err := strMethod(reason, "replace")
			return pyTitle(strings.ReplaceAll(s, "_", " ")), err
		}
		var parts []string
		switch kind {
		case activateNew:
			parts = []string{"New Debit Card Activation Successful", "Card ID: " + id, "Status: ACTIVE", "Activation Date: " + todayStr, "",
				"Your card is now ready to use at any ATM or point of sale terminal.", "For security, please sign the back of your card."}
			if len(others) > 0 {
				parts = append(parts, "\nNote: Previous card(s) have been deactivated: "+strings.Join(others, ", "))
			}
		case activateReplacement:
			t, err := title()
			if err != nil {
				return "", err
			}
			parts = []string{"Replacement Debit Card Activation Successful", "Card ID: " + id, "Replacement Reason: " + t,
				"Status: ACTIVE", "Activation Date: " + todayStr, "", "Your replacement card is now ready to use.", "",
				"IMPORTANT SECURITY REMINDERS:", "- Please review your recent transactions for any unauthorized charges",
				"- Report any suspicious activity immediately"}
			if reason == "fraud" {
				parts = append(parts, "- Since fraud was suspected, we recommend changing your online banking password")
			}
			if len(others) > 0 {
				parts = append(parts, "\nPrevious card(s) have been deactivated for security: "+strings.Join(others, ", "))
			}
		case activateReissue:
			t, err := title()
			if err != nil {
				return "", err
			}
			parts = []string{"Reissued Debit Card Activation Successful", "Card ID: " + id, "Reissue Reason: " + t,
				"Status: ACTIVE", "Activation Date: " + todayStr, "", "Your reissued card is now ready to use."}
			if len(others) > 0 {
				parts = append(parts, "\nNote: Your previous card(s) ("+strings.Join(others, ", ")+") will remain active for 24 hours as a grace period.",
					"After 24 hours, the old card(s) will be automatically deactivated.")
			}
			if inStrs(reason, "expired", "bank_reissue") {
				parts = append(parts, "\nReminder: If your card number changed, please update any recurring payments with your new card details.")
			}
		}
		return strings.Join(parts, "\n"), nil
	}
}
