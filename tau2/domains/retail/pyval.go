package retail

import (
	"fmt"
	"math/big"
	"slices"
	"unicode/utf8"

	"tau2rl/tau2/pyjson"
)

// What CPython does with the generic JSON values (nil, bool, int64,
// *big.Int, float64, string, []any, *pyjson.Object) that τ² passes to the
// retail tools unvalidated: str(), dict membership, iteration, len(),
// list.count(), str.lower(). Each helper returns Python's exception text.

// pyStr is Python's str(v) (f-string rendering); lists and dicts render as
// their repr.
func pyStr(v any) string {
	switch v.(type) {
	case []any, *pyjson.Object:
		return pyjson.Repr(v)
	case *big.Int, nil, bool, int64, float64, string:
		return pyjson.Str(v)
	}
	return fmt.Sprint(v)
}

// dictKey reproduces `key in d` for a dict with str keys: the key to look
// up and whether it can be present at all. Unhashable keys (list, dict)
// raise TypeError; other non-str keys are simply absent.
func dictKey(v any) (string, bool, error) {
	switch x := v.(type) {
	case string:
		return x, true, nil
	case []any, *pyjson.Object:
		return "", false, fmt.Errorf("unhashable type: '%s'", pyjson.TypeName(v))
	}
	return "", false, nil
}

// seq is an iterable argument as Python sees it: a list (its elements), a
// str (its code points, as 1-char strs) or a dict (its keys).
type seq struct {
	elems  []any
	isDict bool
}

// iterate is Python's iter(v); non-iterables raise TypeError.
func iterate(v any) (seq, error) {
	switch x := v.(type) {
	case []any:
		return seq{elems: x}, nil
	case string:
		chars := pyChars(x)
		elems := make([]any, len(chars))
		for i, c := range chars {
			elems[i] = c
		}
		return seq{elems: elems}, nil
	case *pyjson.Object:
		keys := x.Keys()
		elems := make([]any, len(keys))
		for i, k := range keys {
			elems[i] = k
		}
		return seq{elems: elems, isDict: true}, nil
	}
	return seq{}, fmt.Errorf("'%s' object is not iterable", pyjson.TypeName(v))
}

// pyLen is Python's len(v) for a generic value.
func pyLen(v any) (int, error) {
	switch v.(type) {
	case []any, string, *pyjson.Object:
		s, _ := iterate(v)
		return len(s.elems), nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", pyjson.TypeName(v))
}

// countStr is seq.count(x) for a str x: list.count compares with ==, which
// only a str equal to x satisfies; str.count(x) of a 1-char x counts its
// occurrences, the same number. Dicts have no count method.
func (s seq) countStr(x string) (int, error) {
	if s.isDict {
		return 0, fmt.Errorf("'dict' object has no attribute 'count'")
	}
	n := 0
	for _, e := range s.elems {
		if es, ok := e.(string); ok && es == x {
			n++
		}
	}
	return n, nil
}

// checkCounts is τ²'s existence check shared by the exchange, modify and
// return tools:
//
//	for item_id in item_ids:
//	    if item_ids.count(item_id) > all_item_ids.count(item_id): raise ...
//
// notFound renders the exception for the offending item. A non-str item
// is always "not found" (it equals no item id of the order).
func checkCounts(items seq, order *Order, notFound func(item any) error) error {
	for _, it := range items.elems {
		s, isStr := it.(string)
		if !isStr {
			if items.isDict {
				return fmt.Errorf("'dict' object has no attribute 'count'")
			}
			return notFound(it)
		}
		n, err := items.countStr(s)
		if err != nil {
			return err
		}
		have := 0
		for _, oi := range order.Items {
			if oi.ItemID == s {
				have++
			}
		}
		if n > have {
			return notFound(it)
		}
	}
	return nil
}

// sortedStrs is Python's sorted() of a seq whose elements are all str
// (callers have checked them); Go's byte order on UTF-8 (and WTF-8) text
// is Python's code-point order.
func sortedStrs(s seq) []string {
	out := make([]string, 0, len(s.elems))
	for _, e := range s.elems {
		out = append(out, e.(string))
	}
	slices.Sort(out)
	return out
}

// pyChars splits s into its code points, keeping WTF-8 lone surrogates
// (as pyjson decodes them) as single 3-byte units, as Python iterates a
// str.
func pyChars(s string) []string {
	out := make([]string, 0, len(s))
	for i := 0; i < len(s); {
		n := pyjson.CharLen(s, i)
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

// pyLowerOf is `v.lower()`: str.lower() for a str, AttributeError
// otherwise.
func pyLowerOf(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("'%s' object has no attribute 'lower'", pyjson.TypeName(v))
	}
	return pyjson.Lower(s), nil
}

// lowerEquals reports pyjson.Lower(s) == lower without allocating when s is
// ASCII (every DB name and email), the per-user test of the user lookups.
func lowerEquals(s, lower string) bool {
	if len(s) != len(lower) {
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return pyjson.Lower(s) == lower
			}
		}
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return pyjson.Lower(s) == lower
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
