package banking_knowledge

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	for name, f := range map[string]discoverableFunc{
		"close_bank_account_7392":  closeBankAccount,
		"freeze_debit_card_3892":   freezeDebitCard,
		"unfreeze_debit_card_3893": unfreezeDebitCard,
	} {
		agentDiscoverable[name] = f
	}
}

type closureFee struct{ fee, window float64 }

var (
	checkingEarlyClosure = map[string]closureFee{
		"Light Blue Account": {15, 30}, "Light Green Account": {15, 30}, "Green Fee-Free Account": {15, 30},
		"Blue Account": {25, 60}, "Green Account": {25, 60}, "Evergreen Account": {50, 90}, "Bluest Account": {100, 180},
	}
	savingsEarlyClosure = map[string]closureFee{
		"Bronze Account": {20, 60}, "Silver Account": {35, 90}, "Silver Plus Account": {35, 90},
		"Gold Account": {75, 180}, "Gold Plus Account": {75, 180}, "Gold Years Account": {75, 180},
		"Platinum Account": {150, 270}, "Platinum Plus Account": {150, 270}, "Diamond Elite Account": {150, 270},
	}
)

func closeBankAccount(db *DB, a *pyjson.Object) (string, error) {
	v := get(a, "account_id")
	reason := getOr(a, "reason", "Customer requested closure")
	waive := getOr(a, "waive_early_closure_fee", false)
	if !truthy(v) {
		return "Error: Missing required parameter (account_id).", nil
	}
	acc, id, ok := db.accountByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Account '%s' not found.", pyStr(v)), nil
	}
	if getOr(acc, "status", nil) == "CLOSED" {
		return fmt.Sprintf("Error: Account '%s' is already closed.", id), nil
	}
	bal, err := accountBalance(acc)
	if err != nil {
		return "", err
	}
	fee := 0.0
	if !truthy(waive) {
		level, _ := getOr(acc, "level", "").(string)
		cls := getOr(acc, "class", "")
		opened := getOr(acc, "date_opened", "")
		var cfg *closureFee
		if cls == "checking" {
			if c, ok := checkingEarlyClosure[level]; ok {
				cfg = &c
			}
		} else if cls == "savings" {
			if c, ok := savingsEarlyClosure[level]; ok {
				cfg = &c
			}
		}
		if cfg != nil && truthy(opened) {
			t, ok, err := strptime(opened, false)
			if err != nil {
				return "", err
			}
			if ok && float64(daysSince(t)) < cfg.window {
				if bal < cfg.fee {
					return "Error: Account unable to be closed.", nil
				}
				fee = cfg.fee
			}
		}
	}
	if bal-fee != 0 {
		return "Error: Account balance must be $0.00 before closing. Current balance: $" + fmt2(bal), nil
	}
	acc.Set("status", "CLOSED")
	acc.Set("date_closed", todayStr)
	acc.Set("closure_reason", reason)
	acc.Set("early_closure_fee_waived", waive)
	yes := "No"
	if truthy(waive) {
		yes = "Yes"
	}
	return fmt.Sprintf("Bank account closed successfully!\n  - Account ID: %s\n  - Account Type: %s\n  - Account Class: %s\n  - Status: CLOSED\n  - Date Closed: %s\n  - Reason: %s\n  - Early Closure Fee Waived: %s",
		id, pyStr(getOr(acc, "account_type", "N/A")), pyStr(getOr(acc, "account_class", "N/A")), todayStr, pyStr(reason), yes), nil
}

// debitCardByArg looks a debit card up by an argument value.
func (db *DB) debitCardByArg(v any) (*pyjson.Object, string, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, "", false
	}
	c, ok := db.DebitCards.Data.Get(s)
	return c, s, ok
}

func freezeDebitCard(db *DB, a *pyjson.Object) (string, error) {
	v := get(a, "card_id")
	if !truthy(v) {
		return "Error: Missing required parameter: card_id.", nil
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	st := getOr(card, "status", nil)
	if st == "FROZEN" {
		return fmt.Sprintf("Error: Debit card '%s' is already frozen.", id), nil
	}
	if st != "ACTIVE" {
		return fmt.Sprintf("Error: Debit card '%s' cannot be frozen. Current status: %s. Only ACTIVE cards can be frozen.", id, pyStr(st)), nil
	}
	card.Set("status", "FROZEN")
	card.Set("frozen_date", todayStr)
	return strings.Join([]string{"Debit Card Frozen Successfully", "Card ID: " + id, "Status: FROZEN",
		"Frozen Date: " + todayStr, "", "While frozen:",
		"- All new purchase transactions will be declined",
		"- Recurring payments and subscriptions will be declined",
		"- Pending transactions already authorized may still process", "",
		"To unfreeze, the customer can call customer service or use the mobile app.",
		"If the card is confirmed lost or stolen, recommend closing the card permanently instead."}, "\n"), nil
}

// linkedAccountClosed is the "linked checking account is still open" check
// of several debit card tools: the account id when it exists and is not OPEN.
func (db *DB) linkedAccountNotOpen(card *pyjson.Object) (string, bool) {
	accV := getOr(card, "account_id", nil)
	if !truthy(accV) {
		return "", false
	}
	acc, id, ok := db.accountByArg(accV)
	if ok && getOr(acc, "status", nil) != "OPEN" {
		return id, true
	}
	return "", false
}

func unfreezeDebitCard(db *DB, a *pyjson.Object) (string, error) {
	v := get(a, "card_id")
	if !truthy(v) {
		return "Error: Missing required parameter: card_id.", nil
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	st := getOr(card, "status", nil)
	if st == "ACTIVE" {
		return fmt.Sprintf("Error: Debit card '%s' is already active.", id), nil
	}
	if st != "FROZEN" {
		return fmt.Sprintf("Error: Debit card '%s' cannot be unfrozen. Current status: %s. Only FROZEN cards can be unfrozen.", id, pyStr(st)), nil
	}
	if accID, bad := db.linkedAccountNotOpen(card); bad {
		return fmt.Sprintf("Error: The linked checking account '%s' is no longer open. Card cannot be unfrozen.", accID), nil
	}
	card.Set("status", "ACTIVE")
	card.Set("unfrozen_date", todayStr)
	return strings.Join([]string{"Debit Card Unfrozen Successfully", "Card ID: " + id, "Status: ACTIVE",
		"Unfrozen Date: " + todayStr, "", "The card is now active and ready to use immediately.",
		"All transactions will process normally."}, "\n"), nil
}
