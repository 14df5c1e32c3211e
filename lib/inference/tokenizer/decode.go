package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// byteToUnicode is GPT-2's bytes_to_unicode table: printable Latin-1 bytes map
// to themselves, the others to U+0100 and up, so that every byte is a visible
// character in vocab strings.
func byteToUnicode() [256]rune {
	var t [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}

func unicodeToByte() map[rune]byte {
	enc := byteToUnicode()
	m := make(map[rune]byte, 256)
	for b, r := range enc {
		m[r] = byte(b)
	}
	return m
}

func byteLevelDecode(s string, dec map[rune]byte) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := dec[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// Decode turns ids back into text as HF's decode(ids,
// skip_special_tokens=False) does: the tokens' bytes are concatenated and
// invalid UTF-8 (a cut multi-byte character) becomes U+FFFD per maximal
// invalid subsequence, like Rust's String::from_utf8_lossy. Unlike HF, which
// silently skips ids it does not know, an unknown id is an error.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	b, err := t.AppendBytes(nil, ids, false)
	if err != nil {
		return "", err
	}
	return LossyUTF8(b), nil
}

// DecodeSkipSpecial is Decode with skip_special_tokens=True: ids of added
// tokens flagged special (<|im_end|>, <|endoftext|>, …) are left out.
func (t *Tokenizer) DecodeSkipSpecial(ids []int32) (string, error) {
	b, err := t.AppendBytes(nil, ids, true)
	if err != nil {
		return "", err
	}
	return LossyUTF8(b), nil
}

// AppendBytes appends the raw bytes of ids to dst, optionally skipping special
// tokens. Streaming decoders use it to hold back an incomplete character.
func (t *Tokenizer) AppendBytes(dst []byte, ids []int32, skipSpecial bool) ([]byte, error) {
	for i, id := range ids {
		if id < 0 || int(id) >= len(t.idBytes) || !t.present[id] {
			return dst, fmt.Errorf("tokenizer: decode: id %d at position %d is outside the vocabulary (size %d)", id, i, len(t.idBytes))
		}
		if skipSpecial && t.special[id] {
			continue
		}
		dst = append(dst, t.idBytes[id]...)
	}
	return dst, nil
}

// LossyUTF8 converts b to a string, replacing each maximal invalid
// subsequence with one U+FFFD exactly as Rust's String::from_utf8_lossy (and
// the WHATWG decoder) does. Go's strings.ToValidUTF8 differs: it collapses a
// whole run of invalid bytes into one replacement.
func LossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			sb.WriteByte(c)
			i++
			continue
		}
		if r, size := utf8.DecodeRune(b[i:]); r != utf8.RuneError || size > 1 {
			sb.Write(b[i : i+size])
			i += size
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += invalidPrefixLen(b[i:])
	}
	return sb.String()
}

// invalidPrefixLen is the length of the maximal prefix of b that could start
// a valid sequence but does not complete one (at least 1).
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var width int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		width = 2
	case c == 0xE0:
		width, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		width = 3
	case c == 0xED:
		width, hi = 3, 0x9F
	case c == 0xF0:
		width, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		width = 4
	case c == 0xF4:
		width, hi = 4, 0x8F
	default:
		return 1
	}
	if len(b) < 2 || b[1] < lo || b[1] > hi {
		return 1
	}
	n := 2
	for n < width && n < len(b) && b[n] >= 0x80 && b[n] <= 0xBF {
		n++
	}
	return n
}
