package banking_knowledge

import (
	"fmt"
	"math"
	"strings"

	"tau2rl/tau2/pyjson"
)

func init() {
	agentDiscoverable["get_atm_deposit_images_8473"] = getATMDepositImages
}

// depositImage is one of upstream's hard-coded deposit scans (the ATM
// deposits some tasks dispute).
type depositImage struct{ atm, envelope, notes string }

var depositImages = map[string]depositImage{
	"btxn_834027370c20":         {atm: "ATM #3921", envelope: "\n=== ATM DEPOSIT ENVELOPE SCAN ===\nEnvelope ID: ENV-2025-3921-00923\nDeposit Time: 3:47 PM CST\nATM Location: Rho-Bank ATM #3921, Cedar Lane Branch, Austin, TX\n\n--- ENVELOPE CONTENTS ---\nItem 1: Personal Check\n  - Check Number: 7284\n  - Drawn On: First Texas Bank\n  - Payee: Derek Yamamoto\n  - Amount: $875.00\n  - Memo: \"October rent refund\"\n  - Signature: Present and legible\n  - Date on Check: 11/03/2025\n\nItem 2: Cash\n  - Denomination breakdown:\n    * 2 x $100 bills = $200.00\n    * 3 x $20 bills = $60.00\n  - Total Cash: $260.00\n\n--- DEPOSIT SUMMARY ---\nCheck Total: $875.00\nCash Total: $260.00\nGRAND TOTAL: $1,135.00\n\n--- MACHINE RECORD ---\nAmount Recorded by ATM: $385.00\nDISCREPANCY DETECTED: $750.00 difference\n\n--- IMAGE QUALITY ---\nEnvelope scan: CLEAR\nCheck front: CLEAR\nCheck back (endorsement): CLEAR - endorsed \"For Deposit Only - Derek Yamamoto\"\nCash image: CLEAR - bills visible and countable\n", notes: "Images clearly show deposit contents totaling $1,135.00. ATM machine recorded only $385.00. Discrepancy of $750.00 confirmed via image review."},
	"btxn_test_deposit_001":     {atm: "ATM #3921", envelope: "\n=== ATM DEPOSIT ENVELOPE SCAN ===\nEnvelope ID: ENV-2025-3921-00847\nDeposit Time: 2:34 PM EST\nATM Location: Rho-Bank ATM #3921, 742 Oak Avenue, Portland, OR\n\n--- ENVELOPE CONTENTS ---\nItem 1: Personal Check\n  - Check Number: 4821\n  - Drawn On: First National Bank\n  - Payee: Linda Patterson\n  - Amount: $875.00\n  - Memo: \"October rent refund\"\n  - Signature: Present and legible\n  - Date on Check: 11/05/2025\n\nItem 2: Cash\n  - Denomination breakdown:\n    * 2 x $100 bills = $200.00\n    * 3 x $20 bills = $60.00\n  - Total Cash: $260.00\n\n--- DEPOSIT SUMMARY ---\nCheck Total: $875.00\nCash Total: $260.00\nGRAND TOTAL: $1,135.00\n\n--- MACHINE RECORD ---\nAmount Recorded by ATM: $385.00\nDISCREPANCY DETECTED: $750.00 difference\n\n--- IMAGE QUALITY ---\nEnvelope scan: CLEAR\nCheck front: CLEAR\nCheck back (endorsement): CLEAR - endorsed \"For Deposit Only - Linda Patterson\"\nCash image: CLEAR - bills visible and countable\n", notes: "Images clearly show deposit contents totaling $1,135.00. ATM machine recorded only $385.00. Discrepancy of $750.00 confirmed via image review."},
	"btxn_test_atm_dep_partial": {atm: "ATM #5847", envelope: "\n=== ATM DEPOSIT ENVELOPE SCAN ===\nEnvelope ID: ENV-2025-5847-00293\nDeposit Time: 10:15 AM EST\n\n--- ENVELOPE CONTENTS ---\nItem 1: Personal Check\n  - Check Number: 7392\n  - Amount: $500.00\n\n--- DEPOSIT SUMMARY ---\nCheck Total: $500.00\nCash Total: $0.00\nGRAND TOTAL: $500.00\n\n--- MACHINE RECORD ---\nAmount Recorded by ATM: $500.00\nNo discrepancy detected.\n", notes: "Images confirm deposit matches recorded amount. No discrepancy found."},
}

func getATMDepositImages(db *DB, a *pyjson.Object) (string, error) {
	v := get(a, "transaction_id")
	if !truthy(v) {
		return "Error: Missing required parameter: transaction_id", nil
	}
	id, _ := v.(string)
	txn, ok := db.BankAccountTransactionHist.Data.Get(id)
	if _, isStr := v.(string); !ok || !isStr {
		return fmt.Sprintf("Error: Transaction '%s' not found.", pyStr(v)), nil
	}
	if getOr(txn, "type", nil) != "atm_deposit" {
		return fmt.Sprintf("Error: Transaction '%s' is not an ATM deposit. This tool only works for ATM deposit transactions.", id), nil
	}
	descV := getOr(txn, "description", "")
	desc, err := strMethod(descV, "upper")
	if err != nil {
		return "", err
	}
	up := strings.ToUpper(desc)
	if !strings.Contains(up, "RHO-BANK") && !strings.Contains(up, "RHOBANK") {
		return fmt.Sprintf("Error: Transaction '%s' is from a third-party ATM. Deposit images are only available for Rho-Bank ATM deposits. For third-party ATM disputes, a chargeback request must be submitted to the ATM network.", id), nil
	}
	date := pyStr(getOr(txn, "date", "Unknown"))
	if img, ok := depositImages[id]; ok {
		return "ATM Deposit Image Retrieval Results\n=====================================\nTransaction ID: " + id +
			"\nATM: " + img.atm + "\nDeposit Date: " + date + "\n\n" + img.envelope +
			"\n\n--- VERIFICATION NOTES ---\n" + img.notes + "\n", nil
	}
	amtV := getOr(txn, "amount", int64(0))
	amt, isNum := num(amtV)
	if !isNum {
		return "", fmt.Errorf("bad operand type for abs(): '%s'", pyjson.TypeName(amtV))
	}
	return "ATM Deposit Image Retrieval Results\n=====================================\nTransaction ID: " + id +
		"\nATM: " + desc + "\nDeposit Date: " + date + "\nAmount Recorded: $" + fmt2(math.Abs(amt)) +
		"\n\n--- IMAGE STATUS ---\nStatus: IMAGES NOT AVAILABLE\nReason: Deposit images for this transaction have either expired (older than 90 days) or were not captured by the ATM system.\n\nFor deposits without available images, the dispute will proceed based on customer statement and ATM journal records only. Investigation timeline may be extended.\n", nil
}
