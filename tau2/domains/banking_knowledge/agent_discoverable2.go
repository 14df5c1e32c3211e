package banking_knowledge

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"tau2rl/tau2/pyjson"
)

func init() {
	for name, f := range map[string]discoverableFunc{
		"open_bank_account_4821":             openBankAccount,
		"get_debit_cards_by_account_id_7823": getDebitCardsByAccount,
		"get_bank_account_transactions_9173": getBankAccountTransactions,
		"get_closure_reason_history_8293": queryListing("credit_card_account_id", "credit_card_closure_reasons", "credit_card_account_id",
			"Closure reason history retrieved successfully.", "get_closure_reason_history_8293",
			"Closure reason history for credit card account %s:", "\nNo closure reason records found for this credit card account."),
	} {
		agentDiscoverable[name] = f
	}
}

// now is get_now(): 2025-11-14 03:40:00 (naive).
var now = time.Date(2025, 11, 14, 3, 40, 0, 0, time.UTC)

var (
	dateRE     = regexp.MustCompile(`^(\d{1,2})/(\d{1,2})/(\d{4})$`)
	dateTimeRE = regexp.MustCompile(`^(\d{1,2})/(\d{1,2})/(\d{4}) (\d{1,2}):(\d{1,2}):(\d{1,2})$`)
)

// strptime is datetime.strptime for "%m/%d/%Y" (withTime false) or
// "%m/%d/%Y %H:%M:%S": Python accepts one- or two-digit fields. ok=false is
// its ValueError; a non-str value is its TypeError.
func strptime(v any, withTime bool) (time.Time, bool, error) {
	s, isStr := v.(string)
	if !isStr {
		return time.Time{}, false, typeErrorf("strptime() argument 1 must be str, not %s", pyjson.TypeName(v))
	}
	re := dateRE
	if withTime {
		re = dateTimeRE
	}
	m := re.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false, nil
	}
	n := make([]int, len(m)-1)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	mo, d, y := n[0], n[1], n[2]
	if mo < 1 || mo > 12 || d < 1 || y < 1 {
		return time.Time{}, false, nil
	}
	h, mi, se := 0, 0, 0
	if withTime {
		h, mi, se = n[3], n[4], n[5]
		if h > 23 || mi > 59 || se > 61 {
			return time.Time{}, false, nil
		}
	}
	t := time.Date(y, time.Month(mo), d, h, mi, min(se, 59), 0, time.UTC)
	if t.Day() != d { // 02/30
		return time.Time{}, false, nil
	}
	return t, true, nil
}

// daysSince is (now - t).days (floor).
func daysSince(t time.Time) int {
	return int(math.Floor(now.Sub(t).Hours() / 24))
}

// getOr is dict.get(k, default).
func getOr(o *pyjson.Object, k string, def any) any {
	if v, ok := o.Get(k); ok {
		return v
	}
	return def
}

func openBankAccount(db *DB, a *pyjson.Object) (string, error) {
	uid, at, ac := get(a, "user_id"), get(a, "account_type"), get(a, "account_class")
	if !truthy(uid) || !truthy(at) || !truthy(ac) {
		return "Error: Missing required parameters.", nil
	}
	valid := []string{"checking", "savings", "business_checking", "business_savings"}
	if !inStrs(at, valid...) {
		return "Error: Invalid account_type. Must be one of: " + pyListRepr(valid), nil
	}
	ageDays := func(acc *pyjson.Object) (int, error) {
		t, ok, err := strptime(getOr(acc, "date_opened", ""), false)
		if err != nil || !ok {
			return 0, err
		}
		return daysSince(t), nil
	}
	var accs []*pyjson.Object
	for _, acc := range db.Accounts.Data.All() {
		if pyEq(getOr(acc, "user_id", nil), uid) {
			accs = append(accs, acc)
		}
	}
	accType := func(acc *pyjson.Object) any { return getOr(acc, "account_type", getOr(acc, "class", "")) }
	isOpen := func(acc *pyjson.Object) bool { return inStrs(getOr(acc, "status", ""), "OPEN", "ACTIVE") }
	const notMet = "Error: Account eligibility requirements not met."
	switch at {
	case "savings":
		ok := false
		for _, acc := range accs {
			if inStrs(accType(acc), "checking", "personal_checking") && isOpen(acc) {
				d, err := ageDays(acc)
				if err != nil {
					return "", err
				}
				if d >= 14 {
					ok = true
					break
				}
			}
		}
		if !ok {
			return notMet, nil
		}
	case "business_checking":
		for _, acc := range accs {
			if getOr(acc, "status", nil) == "CLOSED" {
				return notMet, nil
			}
		}
		if !slices.ContainsFunc(accs, func(acc *pyjson.Object) bool {
			return inStrs(accType(acc), "checking", "personal_checking") && isOpen(acc)
		}) {
			return notMet, nil
		}
	case "business_savings":
		for _, acc := range accs {
			bal, err := accountBalance(acc)
			if err != nil {
				return "", err
			}
			if bal < 0 {
				return notMet, nil
			}
		}
		ok := false
		for _, acc := range accs {
			if accType(acc) == "business_checking" && isOpen(acc) {
				d, err := ageDays(acc)
				if err != nil {
					return "", err
				}
				if d >= 30 {
					ok = true
					break
				}
			}
		}
		if !ok {
			return notMet, nil
		}
	}
	id := detID("account:"+pyStr(uid)+":"+pyStr(at)+":"+pyStr(ac), 16)
	rec := pyjson.NewObject("account_id", id, "user_id", uid, "account_type", at, "account_class", ac,
		"current_holdings", "0.00", "status", "OPEN", "date_opened", todayStr)
	if !db.addToDB("accounts", id, rec) {
		return fmt.Sprintf("Failed to open account: Account ID '%s' may already exist.", id), nil
	}
	return fmt.Sprintf("Bank account opened successfully!\n  - Account ID: %s\n  - User ID: %s\n  - Account Type: %s\n  - Account Class: %s\n  - Status: OPEN\n  - Initial Balance: $0.00\n  - Date Opened: %s",
		id, pyStr(uid), pyStr(at), pyStr(ac), todayStr), nil
}

// accountByArg looks an account up by an argument value (dict membership).
func (db *DB) accountByArg(v any) (*pyjson.Object, string, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, "", false
	}
	acc, ok := db.Accounts.Data.Get(s)
	return acc, s, ok
}

func getDebitCardsByAccount(db *DB, a *pyjson.Object) (string, error) {
	v := get(a, "account_id")
	if !truthy(v) {
		return "Error: Missing required parameter 'account_id'.", nil
	}
	acc, id, ok := db.accountByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Account '%s' not found.", pyStr(v)), nil
	}
	cls, err := strMethod(getOr(acc, "class", ""), "lower")
	if err != nil {
		return "", err
	}
	if l := pyjson.Lower(cls); l != "checking" && l != "business_checking" {
		return fmt.Sprintf("Error: Account '%s' is not a checking account. Debit cards are only available for checking accounts.", id), nil
	}
	var cards []*pyjson.Object
	for cid, card := range db.DebitCards.Data.All() {
		if !pyEq(getOr(card, "account_id", nil), id) {
			continue
		}
		info := pyjson.NewObject("card_id", cid)
		for k, x := range card.All() {
			info.Set(k, x)
		}
		move := func(from, to string) {
			x, _ := info.Get(from)
			info.Delete(from)
			info.Set(to, x)
		}
		if info.Has("last_4_digits") && !info.Has("card_number_last_4") {
			move("last_4_digits", "card_number_last_4")
		}
		if info.Has("issue_date") && !info.Has("date_issued") {
			move("issue_date", "date_issued")
		} else if info.Has("created_date") && !info.Has("date_issued") {
			move("created_date", "date_issued")
		}
		cards = append(cards, info)
	}
	if len(cards) == 0 {
		return fmt.Sprintf("No debit cards found for account '%s'.", id), nil
	}
	key := func(c *pyjson.Object) any {
		v, _ := c.Get("date_issued")
		if !truthy(v) {
			return ""
		}
		return v
	}
	var cmpErr error
	sort.SliceStable(cards, func(i, j int) bool {
		c, ok := pyCompare(key(cards[j]), key(cards[i]))
		if !ok && cmpErr == nil {
			cmpErr = typeErrorf("'<' not supported between instances of '%s' and '%s'", pyjson.TypeName(key(cards[j])), pyjson.TypeName(key(cards[i])))
		}
		return c < 0
	})
	if cmpErr != nil {
		return "", cmpErr
	}
	l := make([]any, len(cards))
	for i, c := range cards {
		l[i] = c
	}
	return dumpsIndent2(l), nil
}

func getBankAccountTransactions(db *DB, a *pyjson.Object) (string, error) {
	v := get(a, "account_id")
	if !truthy(v) {
		return "Error: Missing required parameter: account_id", nil
	}
	_, id, ok := db.accountByArg(v)
	if !ok {
		return fmt.Sprintf("Error: Account '%s' not found.", pyStr(v)), nil
	}
	txns := db.queryDB("bank_account_transaction_history", where("account_id", id))
	keys := make([]time.Time, len(txns))
	for i, t := range txns {
		s := pyStr(getOr(t.rec, "date", ""))
		if d, ok, _ := strptime(s, true); ok {
			keys[i] = d
		} else if d, ok, _ := strptime(s, false); ok {
			keys[i] = d
		} else {
			keys[i] = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC) // datetime.min
		}
	}
	idx := make([]int, len(txns))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return keys[idx[i]].After(keys[idx[j]]) })
	sorted := make([]idRecord, len(txns))
	for i, j := range idx {
		sorted[i] = txns[j]
	}
	parts := []string{"Bank account transactions retrieved successfully.", "",
		"Executed: get_bank_account_transactions_9173", "Transactions for account " + id + ":"}
	if len(sorted) > 0 {
		parts = append(parts, formatRecords("bank_account_transaction_history", sorted))
	} else {
		parts = append(parts, "\nNo transactions found for this account.")
	}
	return strings.Join(parts, "\n"), nil
}
