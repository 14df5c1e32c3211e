package evaluator

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"tau2rl/tau2/pyjson"
)

// JSONStyle is the layout of a JSON document: pydantic's model_dump_json
// (Indent 0: compact, no spaces; Indent n: n-space pretty printing, as
// Results.save writes) or Python json.dumps separators (", " and ": ").
type JSONStyle struct {
	// Indent is the number of spaces per nesting level; 0 is compact.
	Indent int
	// Base is the indentation (in spaces) of the line the value starts on,
	// for values spliced into a larger indented document.
	Base int
	// Spaced uses ", " and ": " separators in compact mode (json.dumps).
	Spaced bool
}

// AppendJSON appends v (a generic value: nil, bool, int64, *big.Int,
// float64, string, []any, *pyjson.Object) as pydantic-core writes JSON:
// UTF-8 strings with serde_json's escapes, floats in ryu's shortest form
// ("1.0", "1e16", "1e-7"), NaN and infinities as null.
func AppendJSON(dst []byte, v any, st JSONStyle) ([]byte, error) {
	return appendJSON(dst, v, st, 0)
}

func (st JSONStyle) newline(dst []byte, depth int) []byte {
	dst = append(dst, '\n')
	for i := 0; i < st.Base+depth*st.Indent; i++ {
		dst = append(dst, ' ')
	}
	return dst
}

func (st JSONStyle) comma(dst []byte, depth int) []byte {
	dst = append(dst, ',')
	if st.Indent > 0 {
		return st.newline(dst, depth)
	}
	if st.Spaced {
		dst = append(dst, ' ')
	}
	return dst
}

func (st JSONStyle) colon(dst []byte) []byte {
	if st.Indent > 0 || st.Spaced {
		return append(dst, ':', ' ')
	}
	return append(dst, ':')
}

func appendJSON(dst []byte, v any, st JSONStyle, depth int) ([]byte, error) {
	if depth > 10000 {
		return dst, fmt.Errorf("evaluator: JSON nesting too deep")
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case *big.Int:
		return x.Append(dst, 10), nil
	case float64:
		return appendRyu(dst, x), nil
	case string:
		return appendJSONString(dst, x), nil
	case []any:
		if len(x) == 0 {
			return append(dst, "[]"...), nil
		}
		dst = append(dst, '[')
		if st.Indent > 0 {
			dst = st.newline(dst, depth+1)
		}
		for i, el := range x {
			if i > 0 {
				dst = st.comma(dst, depth+1)
			}
			var err error
			if dst, err = appendJSON(dst, el, st, depth+1); err != nil {
				return dst, err
			}
		}
		if st.Indent > 0 {
			dst = st.newline(dst, depth)
		}
		return append(dst, ']'), nil
	case *pyjson.Object:
		if x.Len() == 0 {
			return append(dst, "{}"...), nil
		}
		dst = append(dst, '{')
		if st.Indent > 0 {
			dst = st.newline(dst, depth+1)
		}
		i := 0
		for k, el := range x.All() {
			if i > 0 {
				dst = st.comma(dst, depth+1)
			}
			i++
			dst = appendJSONString(dst, k)
			dst = st.colon(dst)
			var err error
			if dst, err = appendJSON(dst, el, st, depth+1); err != nil {
				return dst, err
			}
		}
		if st.Indent > 0 {
			dst = st.newline(dst, depth)
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("evaluator: cannot encode %T as JSON", v)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s with serde_json's escaping: quote, backslash
// and control characters escaped, everything else as UTF-8. Lone
// surrogates (WTF-8, as pyjson keeps them) become \udXXX escapes.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				if c < 0x20 {
					dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
				} else {
					dst = append(dst, c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if i+2 < len(s) && c == 0xed && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2] >= 0x80 && s[i+2] <= 0xbf {
				cp := 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
				dst = append(dst, '\\', 'u', hexDigits[cp>>12&0xf], hexDigits[cp>>8&0xf], hexDigits[cp>>4&0xf], hexDigits[cp&0xf])
				i += 3
				continue
			}
			dst = append(dst, "\ufffd"...)
			i++
			continue
		}
		dst = append(dst, s[i:i+size]...)
		i += size
	}
	return append(dst, '"')
}

// appendRyu formats f as pydantic-core's JSON serializer does (checked
// against pydantic 2.13): shortest round-trip digits; plain notation for
// decimal exponents in (-5, 16], e.g. 100.0, 0.00001, 1000000000000000.0;
// otherwise "1e+16", "1.5e-7". Non-finite values are null (pydantic's
// default ser_json_inf_nan).
func appendRyu(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	// Shortest digits d1.d2d3…e±X.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	length := len(digits)
	kk := exp + 1 // position of the decimal point relative to the digits' start
	k := kk - length
	switch {
	case k >= 0 && kk <= 16:
		dst = append(dst, digits...)
		for i := 0; i < k; i++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	case kk > 0 && kk <= 16:
		dst = append(dst, digits[:kk]...)
		dst = append(dst, '.')
		return append(dst, digits[kk:]...)
	case kk > -5 && kk <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -kk; i++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	case length == 1:
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0], '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if kk-1 > 0 {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(kk-1), 10)
}
