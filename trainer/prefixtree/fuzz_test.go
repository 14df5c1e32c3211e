package prefixtree

import "testing"

// FuzzPack decodes arbitrary bytes into sequences (0xFF ends a sequence; the low 3 bits of a byte
// are the token, bit 3 marks a loss token) and checks every packing invariant.
func FuzzPack(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0xFF, 1, 2, 4, 0xFF, 7}, uint8(4), uint8(0))
	f.Add([]byte{0, 8 | 1, 8 | 2, 0xFF, 0, 8 | 1, 8 | 3, 0xFF, 0, 1}, uint8(3), uint8(1))
	f.Add([]byte{5, 5, 5, 5, 0xFF, 5, 5, 0xFF, 5, 5, 5, 5, 5, 5}, uint8(6), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, budget uint8, overhead uint8) {
		var seqs []Sequence
		cur := Sequence{}
		flush := func() {
			if len(cur.Tokens) > 0 {
				cur.Loss[0] = false
				seqs = append(seqs, cur)
			}
			cur = Sequence{}
		}
		maxLen := 0
		for _, b := range data {
			if b == 0xFF {
				flush()
				continue
			}
			cur.Tokens = append(cur.Tokens, int32(b&7))
			cur.Loss = append(cur.Loss, b&8 != 0)
			maxLen = max(maxLen, len(cur.Tokens))
		}
		flush()
		cfg := Config{MaxTokensPerMB: max(maxLen, 1) + int(budget%32), MBOverheadTokens: int(overhead % 8)}
		p, err := Pack(seqs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkPacking(t, seqs, p, cfg.MaxTokensPerMB)
	})
}
