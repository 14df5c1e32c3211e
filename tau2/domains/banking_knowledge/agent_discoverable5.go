package banking_knowledge

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	for name, f := range map[string]discoverableFunc{
		"submit_interest_discrepancy_report_7294":   submitInterestDiscrepancy,
		"submit_credit_limit_increase_request_7392": submitCLIRequest,
		"get_credit_limit_increase_history_4829": queryListing("credit_card_account_id", "credit_limit_increase_requests", "credit_card_account_id",
			"Credit limit increase history retrieved.", "get_credit_limit_increase_history_4829",
			"Credit limit increase history for account %s:", "\nNo credit limit increase requests found for this account."),
		"get_payment_history_6183": getPaymentHistory,
	} {
		agentDiscoverable[name] = f
	}
}

// pyRound is Python's round(x, n) for a float.
func pyRound(x float64, n int) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	return f
}

// strKey returns an argument usable as a dict key lookup (a str), or false.
func strKey(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

func submitInterestDiscrepancy(db *DB, a *pyjson.Object) (string, error) {
	acc, uid := get(a, "account_id"), get(a, "user_id")
	e, ac, d := get(a, "expected_apy"), get(a, "actual_apy"), get(a, "amount_difference")
	if !truthy(acc) || !truthy(uid) || e == nil || ac == nil || d == nil {
		return "Error: Missing required parameters.", nil
	}
	exp, err1 := pyFloat(e)
	act, err2 := pyFloat(ac)
	diff, err3 := pyFloat(d)
	if err1 != nil || err2 != nil || err3 != nil {
		return "Error: expected_apy, actual_apy, and amount_difference must be numbers.", nil
	}
	accID, _ := strKey(acc)
	account, ok := db.Accounts.Data.Get(accID)
	if _, isStr := acc.(string); !ok || !isStr {
		return fmt.Sprintf("Error: Account '%s' not found.", pyStr(acc)), nil
	}
	uidS, _ := strKey(uid)
	user, ok := db.Users.Data.Get(uidS)
	if _, isStr := uid.(string); !ok || !isStr {
		return fmt.Sprintf("Error: User '%s' not found.", pyStr(uid)), nil
	}
	id := "IDR_" + detID("interest_report:"+accID+":"+uidS+":"+floatRepr(exp)+":"+floatRepr(act)+":"+todayStr, 16)
	// upstream adds the report to "interest_discrepancy_reports", a table
	// TransactionalDB does not have: add_to_db returns False and nothing is stored.
	_ = id
	return fmt.Sprintf("\nInterest Discrepancy Report Submitted Successfully!\n  - Report ID: %s\n  - Account: %s (%s)\n  - Customer: %s\n  - Expected APY: %s%%\n  - Actual APY: %s%%\n  - APY Difference: %s%%\n  - Amount Difference: $%s\n  - Status: PENDING_REVIEW\n\nThe backend team will investigate this discrepancy and ensure correct APY calculations are applied going forward.",
		id, accID, pyStr(getOr(account, "level", "Unknown")), pyStr(getOr(user, "name", "Unknown")),
		floatRepr(exp), floatRepr(act), floatRepr(pyRound(exp-act, 4)), fmt2(diff)), nil
}

// fmtIntComma is f"{n:,}" for an int.
func fmtIntComma(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func submitCLIRequest(db *DB, a *pyjson.Object) (string, error) {
	cc, uid, r := get(a, "credit_card_account_id"), get(a, "user_id"), get(a, "requested_increase_amount")
	if !truthy(cc) || !truthy(uid) || r == nil {
		return "Error: Missing required parameters.", nil
	}
	f, err := pyFloat(r)
	if err != nil {
		return "Error: Invalid requested_increase_amount. Must be a whole number.", nil
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return "Error: Invalid requested_increase_amount. Must be a whole number of dollars.", nil
	}
	amt := int64(f)
	if amt <= 0 {
		return "Error: Requested increase amount must be positive.", nil
	}
	ccID, _ := strKey(cc)
	acc, ok := db.CreditCardAccounts.Data.Get(ccID)
	if _, isStr := cc.(string); !ok || !isStr {
		return fmt.Sprintf("Error: Credit card account '%s' not found.", pyStr(cc)), nil
	}
	if !pyEq(getOr(acc, "user_id", nil), uid) {
		return fmt.Sprintf("Error: Credit card account '%s' does not belong to user '%s'.", ccID, pyStr(uid)), nil
	}
	id := "cli_" + detID("cli_request:"+ccID+":"+pyStr(uid)+":"+strconv.FormatInt(amt, 10)+".00", 12)
	rec := pyjson.NewObject("request_id", id, "credit_card_account_id", ccID, "user_id", uid,
		"requested_increase_amount", amt, "submitted_at", todayStr, "status", "PENDING")
	if !db.addToDB("credit_limit_increase_requests", id, rec) {
		return "Error: A similar request may already exist.", nil
	}
	return fmt.Sprintf("Credit limit increase request submitted successfully.\n\nExecuted: submit_credit_limit_increase_request_7392\n  - Request ID: %s\n  - Account: %s\n  - Requested Increase: $%s\n  - Status: PENDING",
		id, ccID, fmtIntComma(amt)), nil
}

// pyIntOf is Python's int(v) for a JSON value; ok=false where it raises.
func pyIntOf(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return 0, false
		}
		return int64(math.Trunc(x)), true
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case string:
		s := strings.ReplaceAll(strings.TrimFunc(x, pyjson.IsSpace), "_", "")
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func getPaymentHistory(db *DB, a *pyjson.Object) (string, error) {
	cc, mv := get(a, "credit_card_account_id"), get(a, "months")
	if !truthy(cc) || mv == nil {
		return "Error: Missing required parameters (credit_card_account_id, months).", nil
	}
	months, ok := pyIntOf(mv)
	if !ok {
		return "Error: Invalid months value. Must be a positive integer.", nil
	}
	if months <= 0 {
		return "Error: months must be a positive integer.", nil
	}
	var pays []*pyjson.Object
	for _, p := range db.PaymentHistory.Data.All() {
		if pyEq(getOr(p, "credit_card_account_id", nil), cc) {
			pays = append(pays, p)
		}
	}
	if len(pays) == 0 {
		return fmt.Sprintf("No payment history found for account '%s'.", pyStr(cc)), nil
	}
	key := func(p *pyjson.Object) any {
		v, _ := p.Get("payment_date")
		if !truthy(v) {
			return ""
		}
		return v
	}
	var cmpErr error
	sort.SliceStable(pays, func(i, j int) bool {
		c, ok := pyCompare(key(pays[j]), key(pays[i]))
		if !ok && cmpErr == nil {
			cmpErr = typeErrorf("'<' not supported between instances of '%s' and '%s'", pyjson.TypeName(key(pays[j])), pyjson.TypeName(key(pays[i])))
		}
		return c < 0
	})
	if cmpErr != nil {
		return "", cmpErr
	}
	if int64(len(pays)) > months {
		pays = pays[:months]
	}
	onTime := 0
	for _, p := range pays {
		if getOr(p, "status", nil) != "ON_TIME" {
			break
		}
		onTime++
	}
	parts := []string{fmt.Sprintf("Payment history for account '%s' (last %d months):", pyStr(cc), months),
		fmt.Sprintf("Consecutive on-time payments: %d", onTime)}
	for _, p := range pays {
		parts = append(parts, fmt.Sprintf("\n  - Payment Date: %s\n    Amount: %s\n    Status: %s",
			pyStr(getOr(p, "payment_date", nil)), pyStr(getOr(p, "amount", nil)), pyStr(getOr(p, "status", nil))))
	}
	return strings.Join(parts, "\n"), nil
}
