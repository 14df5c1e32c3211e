package telecom

import (
	"fmt"
	"math"
	"math/big"
	"strconv"

	"tau2rl/tau2/pyjson"
)

// τ² calls a tool as a Python method with the raw JSON arguments as keyword
// arguments (no schema validation). This file reproduces that binding: the
// errors Python raises for unexpected and missing keyword arguments, and the
// Python str()/type-name renderings that appear in messages when a tool is
// given a value of the wrong JSON type.

// kwargs is one call's keyword arguments, already bound against the
// method's signature by the env framework (unexpected and missing keywords
// are rejected there with CPython's TypeError texts).
type kwargs struct {
	vals map[string]any
}

// get returns the argument, or def when it was not passed.
func (k kwargs) get(name string, def any) any {
	if v, ok := k.vals[name]; ok {
		return v
	}
	return def
}

// pyStr is Python's str(v) for a generic JSON value (f-string rendering).
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return pyjson.FloatRepr(x)
	case nil, bool, int64, *big.Int:
		return pyjson.Str(x)
	}
	return pyjson.Repr(v)
}

// attrErr is Python's AttributeError text for calling a str method on v.
func attrErr(v any, attr string) error {
	return fmt.Errorf("'%s' object has no attribute '%s'", pyjson.TypeName(v), attr)
}

// unhashable reports Python's TypeError for using v as a dict key.
func unhashable(v any) error {
	switch v.(type) {
	case []any, *pyjson.Object:
		return fmt.Errorf("unhashable type: '%s'", pyjson.TypeName(v))
	}
	return nil
}

// pyNumber is a Python int or float argument (bool counts as int, as in Python).
type pyNumber struct {
	f     float64
	isInt bool
	raw   any
}

// number interprets v as a Python number for arithmetic with a float; op
// names the operator for the TypeError Python raises otherwise.
func number(v any, op string, other string) (pyNumber, error) {
	switch x := v.(type) {
	case float64:
		return pyNumber{f: x, raw: v}, nil
	case int64:
		return pyNumber{f: float64(x), isInt: true, raw: v}, nil
	case bool:
		f := 0.0
		if x {
			f = 1
		}
		return pyNumber{f: f, isInt: true, raw: v}, nil
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		if math.IsInf(f, 0) {
			return pyNumber{}, fmt.Errorf("int too large to convert to float")
		}
		return pyNumber{f: f, isInt: true, raw: v}, nil
	}
	return pyNumber{}, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", op, pyjson.TypeName(v), other)
}

// pyTruthy is Python's bool(v) for a generic JSON value.
func pyTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case *big.Int:
		return x.Sign() != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *pyjson.Object:
		return x.Len() > 0
	}
	return true
}

// pyEqualBool is Python's `b == v` for a bool b and a generic value v
// (True == 1 == 1.0 in Python).
func pyEqualBool(b bool, v any) bool {
	n := 0.0
	if b {
		n = 1
	}
	switch x := v.(type) {
	case bool:
		return x == b
	case int64:
		return float64(x) == n
	case float64:
		return x == n
	}
	return false
}

// format2f is Python's f"{x:.2f}".
func format2f(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// round2 is Python's round(x, 2) (correctly rounded, ties to even on the
// exact binary value), which strconv's decimal conversion reproduces.
func round2(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 2, 64), 64)
	return f
}
