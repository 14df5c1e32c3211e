package pyjson

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python str semantics that τ²'s tool results and grading depend on, in one place so every domain
// and the evaluator agree: str.lower(), str.strip(), str.isspace(), the code points of a str that
// may hold WTF-8 lone surrogates (as Loads keeps them), and pydantic's lax bool.

// CharLen is the byte length of the code point of s at byte i: UTF-8, a WTF-8 encoded lone
// surrogate (3 bytes), or 1 for a stray byte. Python iterates a str by these units.
func CharLen(s string, i int) int {
	if isWTF8Surrogate(s, i) {
		return 3
	}
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

// IsSpace is Python's str.isspace() for one character: Unicode White_Space plus the information
// separators U+001C..U+001F (bidi class B/S).
func IsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// Strip is Python's str.strip() without arguments.
func Strip(s string) string {
	return strings.TrimFunc(s, IsSpace)
}

// Lower is Python's str.lower(): the full Unicode lowercase mapping (U+0130 İ becomes "i̇") with
// the Final_Sigma rule for Σ, which Go's strings.ToLower (simple case mapping) lacks. Lone
// surrogates and stray bytes are copied unchanged.
func Lower(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	type cp struct {
		r   rune
		raw string // set for surrogates and invalid bytes: copied verbatim
	}
	var cps []cp
	for i := 0; i < len(s); {
		n := CharLen(s, i)
		r, rn := utf8.DecodeRuneInString(s[i:])
		if n == 3 && rn != 3 || r == utf8.RuneError && rn == 1 {
			cps = append(cps, cp{r: -1, raw: s[i : i+n]})
		} else {
			cps = append(cps, cp{r: r})
		}
		i += n
	}
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i, c := range cps {
		switch {
		case c.r < 0:
			b.WriteString(c.raw)
		case c.r == 0x130:
			b.WriteString("i\u0307")
		case c.r == 0x3A3:
			if finalSigma(len(cps), func(j int) rune { return cps[j].r }, i) {
				b.WriteRune(0x3C2)
			} else {
				b.WriteRune(0x3C3)
			}
		default:
			b.WriteRune(unicode.ToLower(c.r))
		}
	}
	return b.String()
}

// finalSigma is CPython's handle_capital_sigma: Σ at i is final when preceded by a cased letter
// and not followed by one (case-ignorable code points skipped on both sides).
func finalSigma(n int, at func(int) rune, i int) bool {
	j := i - 1
	var c rune
	for ; j >= 0; j-- {
		c = at(j)
		if !isCaseIgnorable(c) {
			break
		}
	}
	final := j >= 0 && isCased(c)
	if final && i+1 < n {
		j = i + 1
		for ; j < n; j++ {
			c = at(j)
			if !isCaseIgnorable(c) {
				break
			}
		}
		final = j == n || !isCased(c)
	}
	return final
}

// isCased is Unicode's Cased property (Lowercase, Uppercase or Lt).
func isCased(r rune) bool {
	return r >= 0 && (unicode.In(r, unicode.Ll, unicode.Lu, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase))
}

// isCaseIgnorable is Unicode's Case_Ignorable property: Mn, Me, Cf, Lm, Sk and the Word_Break
// classes MidLetter, MidNumLet and Single_Quote.
func isCaseIgnorable(r rune) bool {
	if r < 0 {
		return false
	}
	switch r {
	case '\'', '.', ':', 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// LaxBool is pydantic's lax bool validation of a json.loads value: a bool; 0 or 1 (int or
// float); or one of the strings 0/off/f/false/n/no and 1/on/t/true/y/yes, ASCII
// case-insensitive and not stripped (pydantic-core compares the raw string). ok is false for
// anything else.
func LaxBool(v any) (b, ok bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case int64:
		if x == 0 || x == 1 {
			return x == 1, true
		}
	case int:
		if x == 0 || x == 1 {
			return x == 1, true
		}
	case float64:
		if x == 0 || x == 1 {
			return x == 1, true
		}
	case string:
		switch asciiLower(x) {
		case "0", "off", "f", "false", "n", "no":
			return false, true
		case "1", "on", "t", "true", "y", "yes":
			return true, true
		}
	}
	return false, false
}

// asciiLower lowercases ASCII letters only (Rust's eq_ignore_ascii_case, which pydantic-core uses).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
