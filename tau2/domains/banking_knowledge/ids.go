package banking_knowledge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The fixed clock of the domain (upstream utils.py): every scenario happens
// at 2025-11-14 03:40:00 EST.
const (
	todayStr = "11/14/2025"
	nowISO   = "2025-11-14T03:40:00"
)

// detID is _deterministic_id: the first length/2 bytes of sha256(seed), hex.
func detID(seed string, length int) string {
	h := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(h[:length/2])
}

func verificationID(userID, timeVerified string) string {
	r := strings.NewReplacer(" ", "_", ":", "", "-", "")
	return userID + "_" + r.Replace(timeVerified)
}
