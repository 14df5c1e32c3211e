package banking_knowledge

import (
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["file_debit_card_transaction_dispute_6281"] = fileDebitDispute
}

var (
	debitDisputeCategories = []string{"unauthorized_transaction", "atm_cash_discrepancy", "atm_deposit_not_credited",
		"duplicate_charge", "incorrect_amount", "goods_services_not_received", "recurring_charge_after_cancellation",
		"card_present_fraud", "card_not_present_fraud"}
	debitTransactionTypes = []string{"pin_purchase", "signature_purchase", "online_purchase", "atm_withdrawal",
		"atm_deposit", "recurring_payment", "person_to_person"}
	pinStatuses       = []string{"yes_shared", "yes_observed", "no", "unknown"}
	debitCardActions  = []string{"keep_active", "freeze_pending_investigation", "close_and_reissue"}
	fraudCategories   = []string{"unauthorized_transaction", "card_present_fraud", "card_not_present_fraud"}
	debitDisputeProps = []string{"transaction_id", "account_id", "card_id", "user_id", "dispute_category",
		"transaction_date", "discovery_date", "disputed_amount", "transaction_type", "pin_compromised", "card_action"}
)

// pyGreater is a > b with Python's TypeError for incomparable values.
func pyGreater(a, b any, op string) (int, error) {
	c, ok := pyCompare(a, b)
	if !ok {
		return 0, typeErrorf("'%s' not supported between instances of '%s' and '%s'", op, pyjson.TypeName(a), pyjson.TypeName(b))
	}
	return c, nil
}

func fileDebitDispute(db *DB, a *pyjson.Object) (string, error) {
	for _, k := range debitDisputeProps {
		if !truthy(get(a, k)) {
			return "Error: Missing required parameters.", nil
		}
	}
	if get(a, "customer_max_liability_amount") == nil {
		return "Error: customer_max_liability_amount is required.", nil
	}
	for _, k := range []string{"card_in_possession", "contacted_merchant", "police_report_filed", "written_statement_provided"} {
		if get(a, k) == nil {
			return "Error: card_in_possession, contacted_merchant, police_report_filed, and written_statement_provided are required boolean fields.", nil
		}
	}
	cat, tt, pc, ca := get(a, "dispute_category"), get(a, "transaction_type"), get(a, "pin_compromised"), get(a, "card_action")
	if !inStrs(cat, debitDisputeCategories...) {
		return "Error: Invalid dispute_category. Must be one of: " + pyListRepr(debitDisputeCategories), nil
	}
	if !inStrs(tt, debitTransactionTypes...) {
		return "Error: Invalid transaction_type. Must be one of: " + pyListRepr(debitTransactionTypes), nil
	}
	if !inStrs(pc, pinStatuses...) {
		return "Error: Invalid pin_compromised. Must be one of: " + pyListRepr(pinStatuses), nil
	}
	if !inStrs(ca, debitCardActions...) {
		return "Error: Invalid card_action. Must be one of: " + pyListRepr(debitCardActions), nil
	}
	amt := get(a, "disputed_amount")
	c, err := pyGreater(amt, 0.0, "<=")
	if err != nil {
		return "", err
	}
	if c <= 0 {
		return "Error: disputed_amount must be a positive number.", nil
	}
	uid, tid := get(a, "user_id"), get(a, "transaction_id")
	id := "dsp_" + detID("dispute:"+pyStr(uid)+":"+pyStr(tid), 12)
	isFraud := inStrs(cat, fraudCategories...)
	pinShared := pc == "yes_shared"
	elig := get(a, "provisional_credit_eligible")
	var credit any
	if truthy(elig) {
		credit = amt
	}
	rec := pyjson.NewObject("dispute_id", id, "transaction_id", tid, "account_id", get(a, "account_id"),
		"card_id", get(a, "card_id"), "user_id", uid, "dispute_category", cat,
		"transaction_date", get(a, "transaction_date"), "discovery_date", get(a, "discovery_date"),
		"disputed_amount", amt, "transaction_type", tt, "card_in_possession", get(a, "card_in_possession"),
		"pin_compromised", pc, "contacted_merchant", get(a, "contacted_merchant"),
		"police_report_filed", get(a, "police_report_filed"), "written_statement_provided", get(a, "written_statement_provided"),
		"provisional_credit_eligible", elig, "provisional_credit_issued", elig, "provisional_credit_amount", credit,
		"customer_max_liability_amount", get(a, "customer_max_liability_amount"), "card_action", ca,
		"is_fraud_category", isFraud, "pin_shared_voluntarily", pinShared, "submitted_at", todayStr, "status", "OPEN")
	if !db.addToDB("debit_card_disputes", id, rec) {
		return "Error: Dispute may have already been filed for this transaction.", nil
	}
	amtS, err := fmtF2(amt)
	if err != nil {
		return "", err
	}
	parts := []string{"Dispute ID: " + id, "Transaction: " + pyStr(tid), "Account: " + pyStr(get(a, "account_id")),
		"Category: " + pyTitle(strings.ReplaceAll(cat.(string), "_", " ")), "Disputed Amount: $" + amtS,
		"Card Action: " + pyTitle(strings.ReplaceAll(ca.(string), "_", " "))}
	if truthy(elig) {
		parts = append(parts, "Provisional Credit: ISSUED - $"+amtS+" credited within 10 business days per Regulation E.")
	} else {
		parts = append(parts, "Provisional Credit: Not eligible - see Debit Card Provisional Credit Guidelines for details.")
	}
	if pinShared {
		parts = append(parts, "WARNING: Customer indicated PIN was shared voluntarily. This may affect liability determination.")
	}
	if isFraud && !truthy(get(a, "police_report_filed")) {
		c, err := pyGreater(amt, 500.0, ">")
		if err != nil {
			return "", err
		}
		if c > 0 {
			parts = append(parts, "RECOMMENDATION: For fraud disputes over $500, filing a police report is recommended.")
		}
	}
	return strings.Join(parts, "\n"), nil
}
