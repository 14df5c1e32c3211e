package pycalc

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/tau2/pyjson"
)

// TestCalculateGolden compares Calculate with τ²'s calculate() run by
// CPython (testdata/gen_golden.py): result strings and exception texts.
func TestCalculateGolden(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var g struct {
			Expr   string `json:"expr"`
			Result string `json:"result"`
			Error  bool   `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		n++
		got, err := Calculate(g.Expr)
		if g.Error {
			if err == nil || err.Error() != g.Result {
				t.Errorf("Calculate(%q) = %q, %v; want error %q", g.Expr, got, err, g.Result)
			}
			continue
		}
		if err != nil || got != g.Result {
			t.Errorf("Calculate(%q) = %q, %v; want %q", g.Expr, got, err, g.Result)
		}
	}
	if n < 100 {
		t.Fatalf("only %d golden cases", n)
	}
}

// TestRound2Golden checks round(x, 2) against CPython on the pyjson float
// corpus.
func TestRound2Golden(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "pyjson", "testdata", "golden", "floats.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		o, err := pyjson.LoadsObject(sc.Text())
		if err != nil {
			t.Fatal(err)
		}
		bv, _ := o.Get("bits")
		var bits uint64
		switch x := bv.(type) {
		case int64:
			bits = uint64(x)
		case interface{ Uint64() uint64 }:
			bits = x.Uint64()
		}
		x := math.Float64frombits(bits)
		want, _ := o.Get("round2")
		if got := pyjson.FloatRepr(Round2(x)); got != want {
			t.Errorf("round(%v, 2) = %s, want %s", x, got, want)
		}
	}
}

func TestHugeIntegersBounded(t *testing.T) {
	for _, e := range []string{"9**9**9", "2**100000000", "(10**10000)*(10**10000)*(10**10000)*(10**10000)*(10**10000)*(10**10000)*(10**10000)"} {
		if _, err := Calculate(e); err == nil {
			t.Errorf("Calculate(%q) succeeded; want a bounded error", e)
		}
	}
}

func FuzzCalculate(f *testing.F) {
	for _, s := range []string{"1+2*3", "(1)(2)", "2**-1", "7.5//-2", "((", "1/0", "-()", ".5", "00", "9**9**9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Calculate(s) // must not panic or hang
	})
}
