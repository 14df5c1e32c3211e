package banking_knowledge

import (
	"fmt"
	"strconv"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["order_debit_card_5739"] = orderDebitCard
}

// digitsOf keeps the ASCII digits of a hex string, cut to n and
// left-padded with zeros ("".join(c for c in h if c.isdigit())[:n].zfill(n)).
func digitsOf(h string, n int) string {
	var b strings.Builder
	for _, c := range h {
		if c >= '0' && c <= '9' && b.Len() < n {
			b.WriteRune(c)
		}
	}
	s := b.String()
	return strings.Repeat("0", n-len(s)) + s
}

func orderDebitCard(db *DB, a *pyjson.Object) (string, error) {
	excV := get(a, "excess_replacement_fee")
	if !truthy(excV) {
		excV = int64(0)
	}
	var delivery, design any // float or None
	if v := get(a, "delivery_fee"); v != nil {
		f, err := pyFloat(v)
		if err != nil {
			return "Error: delivery_fee must be a number.", nil
		}
		delivery = f
	}
	if v := get(a, "design_fee"); v != nil {
		f, err := pyFloat(v)
		if err != nil {
			return "Error: design_fee must be a number.", nil
		}
		design = f
	}
	var exc any = int64(0)
	if f, err := pyFloat(excV); err == nil {
		exc = f
	}
	accV, uid, dopt, cdes, addr := get(a, "account_id"), get(a, "user_id"), get(a, "delivery_option"), get(a, "card_design"), get(a, "shipping_address")
	if !truthy(accV) || !truthy(uid) || !truthy(dopt) || delivery == nil || !truthy(cdes) || design == nil || !truthy(addr) {
		return "Error: Missing required parameters. Required: account_id, user_id, delivery_option, delivery_fee, card_design, design_fee, shipping_address.", nil
	}
	ds, err := strMethod(dopt, "upper")
	if err != nil {
		return "", err
	}
	ds = strings.ToUpper(ds)
	validDelivery := []string{"STANDARD", "EXPEDITED", "RUSH"}
	if !inStrs(ds, validDelivery...) {
		return "Error: Invalid delivery_option. Must be one of: " + pyListRepr(validDelivery), nil
	}
	cs, err := strMethod(cdes, "upper")
	if err != nil {
		return "", err
	}
	cs = strings.ToUpper(cs)
	validDesign := []string{"CLASSIC", "PREMIUM", "CUSTOM"}
	if !inStrs(cs, validDesign...) {
		return "Error: Invalid card_design. Must be one of: " + pyListRepr(validDesign), nil
	}
	acc, accID, ok := db.accountByArg(accV)
	if !ok {
		return fmt.Sprintf("Error: Account '%s' not found.", pyStr(accV)), nil
	}
	if cls := getOr(acc, "class", nil); cls != "checking" {
		return fmt.Sprintf("Error: Debit cards can only be ordered for checking accounts. Account '%s' is a %s account.", accID, pyStr(cls)), nil
	}
	if st := getOr(acc, "status", nil); st != "OPEN" {
		return fmt.Sprintf("Error: Account must be OPEN. Account '%s' has status: %s", accID, pyStr(st)), nil
	}
	if !pyEq(getOr(acc, "user_id", nil), uid) {
		return fmt.Sprintf("Error: Account '%s' does not belong to user '%s'.", accID, pyStr(uid)), nil
	}
	holdings, err := pyFloat(strings.ReplaceAll(pyStr(getOr(acc, "current_holdings", "0")), ",", ""))
	if err != nil {
		holdings = 0
	}
	if holdings < 25.0 {
		return "Error: Account must have a minimum balance of $25. Current balance: $" + fmt2(holdings), nil
	}
	for _, o := range db.DebitCardOrders.Data.All() {
		if pyEq(getOr(o, "account_id", nil), accID) && getOr(o, "status", nil) == "PENDING" {
			return fmt.Sprintf("Error: There is already a pending debit card order for account '%s'.", accID), nil
		}
	}
	for _, c := range db.DebitCards.Data.All() {
		if pyEq(getOr(c, "account_id", nil), accID) && getOr(c, "status", nil) == "ACTIVE" {
			return fmt.Sprintf("Error: Account '%s' already has an active debit card. Maximum 1 active card per checking account.", accID), nil
		}
	}
	df, gf := delivery.(float64), design.(float64)
	ef, _ := num(exc)
	total := df + gf + ef
	if total > 0 && holdings < total {
		return fmt.Sprintf("Error: Insufficient funds for fees. Total fees: $%s. Current balance: $%s", fmt2(total), fmt2(holdings)), nil
	}
	expected := map[string]string{"STANDARD": "7-10 business days", "EXPEDITED": "3-5 business days", "RUSH": "1-2 business days"}[ds]
	orderID := "dcord_" + detID("debit_card_order:"+accID+":"+pyStr(uid)+":"+ds, 12)
	rec := pyjson.NewObject("order_id", orderID, "account_id", accID, "user_id", uid, "delivery_option", ds,
		"card_design", cs, "shipping_address", addr, "delivery_fee", df, "design_fee", gf,
		"excess_replacement_fee", exc, "total_fee", total, "order_date", todayStr, "expected_delivery", expected, "status", "PENDING")
	if !db.addToDB("debit_card_orders", orderID, rec) {
		return "Error: Failed to create debit card order. Order may already exist.", nil
	}
	feeParts := func(sep string) []string {
		var p []string
		if df > 0 {
			p = append(p, "Delivery"+sep+"$"+floatRepr(df))
		}
		if gf > 0 {
			p = append(p, "Design"+sep+"$"+floatRepr(gf))
		}
		if ef > 0 {
			p = append(p, "Excess Replacement"+sep+"$"+strconv.FormatFloat(ef, 'f', 0, 64))
		}
		return p
	}
	if total > 0 {
		acc.Set("current_holdings", fmt2(holdings-total))
		fee := "btxn_dcfee_" + orderID[len(orderID)-8:]
		db.addToDB("bank_account_transaction_history", fee, pyjson.NewObject("transaction_id", fee, "account_id", accID,
			"date", todayStr, "description", "DEBIT CARD ORDER FEE - "+strings.Join(feeParts(" "), ", "),
			"amount", -total, "type", "debit_card_fee", "status", "posted"))
	}
	cardID := "dbc_" + detID("debit_card:"+accID+":"+pyStr(uid)+":"+todayStr, 12)
	seed := "card_details:" + cardID
	last4 := digitsOf(detID(seed+":last4", 8), 4)
	cvv := digitsOf(detID(seed+":cvv", 6), 3)
	holder := "CARDHOLDER"
	if us, ok := uid.(string); ok {
		if u, ok := db.Users.Data.Get(us); ok {
			n, err := strMethod(getOr(u, "name", "CARDHOLDER"), "upper")
			if err != nil {
				return "", err
			}
			holder = strings.ToUpper(n)
		}
	}
	// 11/14/2025 + 4 years; month 11 has 30 days
	expiration := "11/30/2029"
	var existing []*pyjson.Object
	for _, c := range db.DebitCards.Data.All() {
		if pyEq(getOr(c, "account_id", nil), accID) {
			existing = append(existing, c)
		}
	}
	issue := "new_account"
	var closed *pyjson.Object
	for _, c := range existing {
		if getOr(c, "status", nil) == "CLOSED" {
			closed = c
			break
		}
	}
	if closed != nil {
		cr := getOr(closed, "closure_reason", "first_card")
		switch {
		case inStrs(cr, "lost", "stolen", "fraud"):
			issue = cr.(string)
		case cr == "fraud_suspected":
			issue = "fraud"
		default:
			issue = "first_card"
		}
	} else if len(existing) > 0 {
		issue = "first_card"
	}
	db.addToDB("debit_cards", cardID, pyjson.NewObject("card_id", cardID, "account_id", accID, "user_id", uid,
		"cardholder_name", holder, "last_4_digits", last4, "cvv", cvv, "status", "PENDING", "issue_date", todayStr,
		"expiration_date", expiration, "card_design", cs, "issue_reason", issue))
	parts := []string{"Debit Card Order Confirmed", "Order ID: " + orderID, "Card ID: " + cardID, "Linked Account: " + accID,
		"Delivery Option: " + ds, "Card Design: " + cs, "Shipping Address: " + pyStr(addr), "Expected Delivery: " + expected, "",
		"Note: Card will arrive with status PENDING. Customer must call to activate after receiving the card."}
	if total > 0 {
		parts = append(parts, fmt.Sprintf("Total Fees: $%s (%s) - CHARGED to account %s", fmt2(total), strings.Join(feeParts(": "), ", "), accID),
			"New Account Balance: $"+fmt2(holdings-total))
	} else {
		parts = append(parts, "Total Fees: $0 (No additional charges)")
	}
	return strings.Join(parts, "\n"), nil
}
