package banking_knowledge

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["request_temporary_debit_card_limit_increase_8374"] = tempLimitIncrease
}

var defaultATMLimits = map[string]int64{
	"blue account": 500, "green account": 600, "light blue account": 400, "green fee-free account": 500,
	"evergreen account": 750, "bluest account": 1500, "dark green account": 300, "gold years account": 600,
	"purple account": 1000,
}

// intOrFloat formats a Python number the way str() does (int vs float).
func intOrFloat(v any) string { return pyStr(v) }

func tempLimitIncrease(db *DB, a *pyjson.Object) (string, error) {
	v, lt, nlV := get(a, "card_id"), get(a, "limit_type"), get(a, "new_limit")
	if !truthy(v) {
		return "Error: Missing required parameter: card_id.", nil
	}
	if !truthy(lt) {
		return "Error: Missing required parameter: limit_type.", nil
	}
	if !inStrs(lt, "atm", "purchase") {
		return fmt.Sprintf("Error: Invalid limit_type '%s'. Must be 'atm' or 'purchase'.", pyStr(lt)), nil
	}
	if nlV == nil {
		return "Error: Missing required parameter: new_limit.", nil
	}
	nf, err := pyFloat(nlV)
	if err != nil {
		return fmt.Sprintf("Error: new_limit must be an integer, got '%s'.", pyStr(nlV)), nil
	}
	if nf != math.Trunc(nf) || math.IsInf(nf, 0) {
		return fmt.Sprintf("Error: new_limit must be an integer, got '%s'.", floatRepr(nf)), nil
	}
	nl := int64(nf)
	if nl <= 0 {
		return "Error: new_limit must be a positive amount.", nil
	}
	card, id, ok := db.debitCardByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Debit card '%s' not found.", pyStr(v)), nil
	}
	if st := getOr(card, "status", nil); st != "ACTIVE" {
		return fmt.Sprintf("Error: Debit card '%s' is not active. Current status: %s. Only ACTIVE cards can have limit increases.", id, pyStr(st)), nil
	}
	accV := getOr(card, "account_id", nil)
	acc, accID, ok := db.accountByArg(accV)
	if !truthy(accV) || !ok {
		return fmt.Sprintf("Error: Could not find linked account for debit card '%s'.", id), nil
	}
	if st := getOr(acc, "status", nil); st != "OPEN" {
		return fmt.Sprintf("Error: The linked account '%s' is not in good standing. Account status: %s.", accID, pyStr(st)), nil
	}
	if opened := getOr(acc, "date_opened", nil); truthy(opened) {
		t, ok, err := strptime(opened, false)
		if err != nil {
			return "", err
		}
		if ok {
			today := time.Date(2025, 11, 14, 0, 0, 0, 0, time.UTC)
			age := int(math.Floor(today.Sub(t).Hours() / 24))
			if age < 60 {
				return fmt.Sprintf("Error: Account must be at least 60 days old for a temporary limit increase. Account age: %d days.", age), nil
			}
		}
	}
	lts := lt.(string)
	var cur any
	field, name := "daily_purchase_limit", "Daily Purchase Limit"
	if lts == "atm" {
		field, name = "daily_atm_limit", "Daily ATM Withdrawal Limit"
		cur = getOr(card, field, nil)
		if cur == nil {
			lvl, err := strMethod(getOr(acc, "level", ""), "lower")
			if err != nil {
				return "", err
			}
			lvl = pyjson.Lower(lvl)
			if strings.Contains(lvl, "light green") {
				return "Error: Light Green Account (teen checking) cards have policy-based limits that cannot be modified. The daily ATM withdrawal limit of $150 is fixed by account policy for safety reasons. The customer may request the parent/guardian to withdraw cash from their own account if needed.", nil
			}
			d, ok := defaultATMLimits[lvl]
			if !ok {
				return fmt.Sprintf("Error: Could not determine the default ATM limit for account type '%s'. Please verify the account type.", pyStr(getOr(acc, "level", nil))), nil
			}
			cur = d
		}
	} else {
		cur = getOr(card, field, nil)
	}
	if cur == nil {
		return fmt.Sprintf("Error: The card does not have a %s configured. This may be a restricted account type where limits are set by account policy and cannot be modified.", strings.ToLower(name)), nil
	}
	cf, isNum := num(cur)
	if !isNum {
		return "", typeErrorf("can't multiply sequence by non-int of type 'float'")
	}
	maxAllowed := int64(math.Trunc(cf * 1.5))
	if nl > maxAllowed {
		return fmt.Sprintf("Error: Requested limit $%d exceeds the maximum allowed temporary increase. Maximum temporary limit is $%d (150%% of current $%s limit).", nl, maxAllowed, intOrFloat(cur)), nil
	}
	if float64(nl) <= cf {
		return fmt.Sprintf("Error: Requested limit $%d is not higher than the current limit of $%s.", nl, intOrFloat(cur)), nil
	}
	var inc string
	if ci, ok := cur.(int64); ok {
		inc = strconv.FormatInt(nl-ci, 10)
	} else {
		inc = floatRepr(float64(nl) - cf)
	}
	card.Set(field, nl)
	card.Set("temporary_"+lts+"_limit_increase", true)
	card.Set("original_"+lts+"_limit", cur)
	card.Set("temporary_"+lts+"_limit_expires", todayStr)
	return strings.Join([]string{"Temporary " + name + " Increase Granted Successfully", "Card ID: " + id,
		"Previous Limit: $" + intOrFloat(cur), fmt.Sprintf("New Temporary Limit: $%d", nl), "Increase Amount: $" + inc, "",
		"Important Information:", "- This temporary increase expires in 24 hours",
		"- After expiration, the limit will revert to $" + intOrFloat(cur),
		"- Only one temporary increase is allowed per 24-hour period", "",
		"Note: If the customer is at a third-party (non-Rho-Bank) ATM, that ATM may have its own",
		"per-transaction or daily limits that Rho-Bank cannot override. The customer may need to",
		"use a Rho-Bank ATM or make multiple smaller withdrawals at third-party ATMs."}, "\n"), nil
}
