package evaluator

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"

	"tau2rl/tau2/pyjson"
)

// pyReprStr is Python's repr() of a str: single quotes unless the text has
// a single quote and no double quote; \\, \n, \r, \t and the quote
// escaped; non-printable characters as \xhh, \uhhhh or \Uhhhhhhhh.
func pyReprStr(s string) string {
	q := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteRune(q)
	for _, r := range s {
		switch {
		case r == q || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case !unicode.IsPrint(r) || r == utf8.RuneError:
			switch {
			case r <= 0xff:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteRune(q)
	return b.String()
}

// pyReprStrList is repr() of a list of str (how τ²'s NL judge prompt shows
// the expected outcomes).
func pyReprStrList(l []string) string {
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = pyReprStr(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// pyEqual is Python's == on json.loads values: dicts compare as unordered
// mappings, lists element-wise, numbers by exact value across int, float
// and bool (True == 1 == 1.0), NaN unequal to everything.
func pyEqual(a, b any) bool {
	if na, ok := pyNumber(a); ok {
		nb, ok := pyNumber(b)
		return ok && numEqual(na, nb)
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case *pyjson.Object:
		y, ok := b.(*pyjson.Object)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for k, v := range x.All() {
			w, ok := y.Get(k)
			if !ok || !pyEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// pyNumber normalizes the numeric json.loads types (and bool, a Python
// int) to int64, *big.Int or float64.
func pyNumber(v any) (any, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return int64(1), true
		}
		return int64(0), true
	case int64, float64, *big.Int:
		return x, true
	case int:
		return int64(x), true
	}
	return nil, false
}

func numEqual(a, b any) bool {
	fa, aFloat := a.(float64)
	fb, bFloat := b.(float64)
	switch {
	case aFloat && bFloat:
		return fa == fb
	case aFloat:
		return intFloatEqual(b, fa)
	case bFloat:
		return intFloatEqual(a, fb)
	}
	return toBig(a).Cmp(toBig(b)) == 0
}

func intFloatEqual(i any, f float64) bool {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return false
	}
	bf, _ := new(big.Float).SetFloat64(f).Int(nil)
	return toBig(i).Cmp(bf) == 0
}

func toBig(v any) *big.Int {
	switch x := v.(type) {
	case int64:
		return big.NewInt(x)
	case *big.Int:
		return x
	}
	return new(big.Int)
}

// copyArgs deep-copies decoded JSON arguments (Objects and lists; scalars
// are immutable), so that a tool keeping a reference to its arguments can
// never alias a task's gold actions or a caller's trajectory.
func copyArgs(o *pyjson.Object) *pyjson.Object {
	if o == nil {
		return nil
	}
	out := pyjson.NewMap[any](o.Len())
	for k, v := range o.All() {
		out.Set(k, copyValue(v))
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case *pyjson.Object:
		return copyArgs(x)
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = copyValue(e)
		}
		return l
	case *big.Int:
		return new(big.Int).Set(x)
	}
	return v
}
