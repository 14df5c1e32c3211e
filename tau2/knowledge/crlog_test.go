package knowledge

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestCrLogMatchesPython compares crLog(k+0.5), k < 2000 (every value BM25
// takes the log of for corpora up to 2000 documents), with CPython's
// math.log (testdata/log_golden.json, written by
// python3 -c 'math.log(k+0.5).hex()'). Go's math.Log differs on some.
func TestCrLogMatchesPython(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "log_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]string
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g) != 2000 {
		t.Fatalf("golden has %d entries", len(g))
	}
	goDiffers := 0
	for xs, hs := range g {
		x, _ := strconv.ParseFloat(xs, 64)
		want, err := strconv.ParseFloat(hs, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := crLog(x); got != want {
			t.Errorf("crLog(%v) = %x, Python %s", x, got, hs)
		}
		if math.Log(x) != want {
			goDiffers++
		}
	}
	if goDiffers == 0 {
		t.Fatal("math.Log agrees everywhere: crLog is no longer needed, or the golden is wrong")
	}
	t.Logf("math.Log differs from CPython on %d of %d inputs", goDiffers, len(g))
}
