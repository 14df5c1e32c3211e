package banking_knowledge

import (
	"math/big"
	"strconv"
	"strings"

	"tau2rl/tau2/pyjson"
)

// Upstream's tools take their arguments untyped (the agent's discoverable
// tools get whatever json.loads produced), so the port works on generic
// JSON values with Python's semantics: str(), truthiness, ==, ordering.

// pyStr is Python's str(v) / f"{v}" for a JSON value.
func pyStr(v any) string {
	switch v.(type) {
	case *pyjson.Object, []any:
		return pyjson.Repr(v)
	}
	return pyjson.Str(v)
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	case *big.Int:
		return x.Sign() != 0
	case []any:
		return len(x) > 0
	case *pyjson.Object:
		return x.Len() > 0
	}
	return true
}

// num returns v as a float for arithmetic and whether it is a Python number
// (bool counts, as in Python).
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	}
	return 0, false
}

// pyEq is Python's a == b for JSON values.
func pyEq(a, b any) bool {
	if fa, ok := num(a); ok {
		fb, ok := num(b)
		return ok && fa == fb
	}
	ok, err := pyjson.Equal(a, b)
	return err == nil && ok
}

// pyCompare is Python's ordering of two JSON values: -1, 0, 1, or ok=false
// where Python raises TypeError (str vs int, dicts, None).
func pyCompare(a, b any) (int, bool) {
	if fa, ok := num(a); ok {
		fb, ok := num(b)
		if !ok {
			return 0, false
		}
		switch {
		case fa < fb:
			return -1, true
		case fa > fb:
			return 1, true
		}
		return 0, true
	}
	if sa, ok := a.(string); ok {
		sb, ok := b.(string)
		if !ok {
			return 0, false
		}
		return comparePyStr(sa, sb), true
	}
	if la, ok := a.([]any); ok {
		lb, ok := b.([]any)
		if !ok {
			return 0, false
		}
		for i := 0; i < len(la) && i < len(lb); i++ {
			if pyEq(la[i], lb[i]) {
				continue
			}
			return pyCompare(la[i], lb[i])
		}
		switch {
		case len(la) < len(lb):
			return -1, true
		case len(la) > len(lb):
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// comparePyStr orders by code point, as Python does (UTF-8 byte order is
// the same order).
func comparePyStr(a, b string) int { return strings.Compare(a, b) }

// pyIn is Python's `x in container` for JSON values; ok=false where Python
// raises TypeError.
func pyIn(x, container any) (bool, bool) {
	switch c := container.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, false
		}
		return strings.Contains(c, s), true
	case []any:
		for _, e := range c {
			if pyEq(x, e) {
				return true, true
			}
		}
		return false, true
	case *pyjson.Object:
		switch k := x.(type) {
		case string:
			return c.Has(k), true
		case *pyjson.Object, []any:
			return false, false // unhashable
		}
		return false, true
	}
	return false, false
}

// fmt2 is Python's f"{x:.2f}" for a float.
func fmt2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

// floatRepr is Python's str(float).
func floatRepr(x float64) string { return pyjson.FloatRepr(x) }
