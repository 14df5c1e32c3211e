package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// AddedToken is one entry of tokenizer.json's added_tokens: a string that is
// always encoded as a single id (chat markers, tool-call tags, thinking tags).
type AddedToken struct {
	ID      int32  `json:"id"`
	Content string `json:"content"`
	// Special tokens are dropped by DecodeSkipSpecial, as HF drops them with
	// skip_special_tokens=true. In Qwen3 <tool_call>, <tool_response> and
	// <think> are added but not special.
	Special bool `json:"special"`
}

// Tokenizer encodes and decodes text with a byte-level BPE loaded from a
// Hugging Face tokenizer.json. It is safe for concurrent use.
type Tokenizer struct {
	idBytes [][]byte // id → raw bytes (for added tokens: their content)
	present []bool   // id → whether the id exists (the id space may have holes)
	byteID  [256]int32
	merges  map[uint64]uint64 // (left<<32 | right) → (rank<<32 | new id)

	added      []AddedToken // sorted by content length, longest first
	addedByID  map[int32]AddedToken
	addedStart [256]bool // first bytes of added tokens' contents
	special    []bool    // id → special

	normalizeNFC bool
	split        *regexp2.Regexp

	cacheMu sync.RWMutex
	cache   map[string][]int32
}

// cacheLimit bounds the per-tokenizer piece cache (HF uses 10,000 words);
// once full, new pieces are merged without being cached.
const (
	cacheLimit    = 1 << 16
	cacheMaxPiece = 64
)

// Load reads a tokenizer.json file; path may also name the directory that
// holds it (the layout of a Hugging Face model directory).
func Load(path string) (*Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return t, nil
}

type fileJSON struct {
	AddedTokens []struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   *componentJSON `json:"normalizer"`
	PreTokenizer *componentJSON `json:"pre_tokenizer"`
	Decoder      *componentJSON `json:"decoder"`
	Model        struct {
		Type                    string            `json:"type"`
		Dropout                 *float64          `json:"dropout"`
		UnkToken                *string           `json:"unk_token"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
		ByteFallback            bool              `json:"byte_fallback"`
		IgnoreMerges            bool              `json:"ignore_merges"`
		Vocab                   map[string]int32  `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
	} `json:"model"`
}

type componentJSON struct {
	Type          string          `json:"type"`
	Normalizers   []componentJSON `json:"normalizers"`
	Pretokenizers []componentJSON `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior     string `json:"behavior"`
	Invert       bool   `json:"invert"`
	AddPrefixSpc bool   `json:"add_prefix_space"`
	UseRegex     *bool  `json:"use_regex"`
}

// Parse builds a Tokenizer from the bytes of a tokenizer.json. Only the
// configuration Qwen2/Qwen3 use is accepted (byte-level BPE, NFC or no
// normalizer, one Split regex followed by ByteLevel without its own regex,
// added tokens that are matched verbatim); anything else is an error, so a
// different tokenizer is never silently approximated.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode tokenizer.json: %w", err)
	}
	m := &f.Model
	if m.Type != "BPE" {
		return nil, fmt.Errorf("model type %q: only BPE is supported", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("BPE dropout %v is not supported", *m.Dropout)
	}
	if m.ByteFallback || m.IgnoreMerges {
		return nil, fmt.Errorf("BPE byte_fallback/ignore_merges are not supported")
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("BPE continuing_subword_prefix/end_of_word_suffix are not supported")
	}
	t := &Tokenizer{cache: make(map[string][]int32)}

	switch {
	case f.Normalizer == nil:
	case f.Normalizer.Type == "NFC":
		t.normalizeNFC = true
	default:
		return nil, fmt.Errorf("normalizer %q is not supported (want NFC or none)", f.Normalizer.Type)
	}
	pattern, err := splitPattern(f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if t.split, err = regexp2.Compile(pattern, regexp2.None); err != nil {
		return nil, fmt.Errorf("compile split regex: %w", err)
	}
	// No match timeout, whatever regexp2.DefaultMatchTimeout says: a timeout
	// is the only error regexp2's matcher returns.
	t.split.MatchTimeout = time.Duration(math.MaxInt64)
	if f.Decoder != nil && f.Decoder.Type != "ByteLevel" {
		return nil, fmt.Errorf("decoder %q is not supported (want ByteLevel)", f.Decoder.Type)
	}

	// Vocabulary: byte-level strings → raw bytes.
	maxID := int32(-1)
	for _, id := range m.Vocab {
		maxID = max(maxID, id)
	}
	for _, a := range f.AddedTokens {
		maxID = max(maxID, a.ID)
	}
	if maxID < 0 {
		return nil, fmt.Errorf("empty vocabulary")
	}
	t.idBytes = make([][]byte, maxID+1)
	t.present = make([]bool, maxID+1)
	t.special = make([]bool, maxID+1)
	byteLevel := make(map[string]int32, len(m.Vocab))
	dec := unicodeToByte()
	for tok, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("vocab %q has negative id %d", tok, id)
		}
		b, ok := byteLevelDecode(tok, dec)
		if !ok {
			return nil, fmt.Errorf("vocab entry %q (id %d) is not byte-level text", tok, id)
		}
		if t.present[id] {
			return nil, fmt.Errorf("vocab id %d used twice", id)
		}
		t.idBytes[id], t.present[id] = b, true
		byteLevel[tok] = id
	}
	enc := byteToUnicode()
	for b := 0; b < 256; b++ {
		id, ok := byteLevel[string(enc[b])]
		if !ok {
			return nil, fmt.Errorf("vocab lacks the byte-level symbol for byte %#x", b)
		}
		t.byteID[b] = id
	}

	// Merges, keyed by the pair of symbol ids as HF does.
	t.merges = make(map[uint64]uint64, len(m.Merges))
	for rank, raw := range m.Merges {
		l, r, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("merge %d: %w", rank, err)
		}
		lid, ok1 := byteLevel[l]
		rid, ok2 := byteLevel[r]
		nid, ok3 := byteLevel[l+r]
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("merge %d (%q %q) refers to tokens missing from the vocab", rank, l, r)
		}
		// A repeated pair keeps its last rank, as HF's collect into a HashMap does.
		t.merges[uint64(uint32(lid))<<32|uint64(uint32(rid))] = uint64(rank)<<32 | uint64(uint32(nid))
	}

	// Added tokens.
	t.addedByID = make(map[int32]AddedToken, len(f.AddedTokens))
	for _, a := range f.AddedTokens {
		if a.SingleWord || a.Lstrip || a.Rstrip || a.Normalized {
			return nil, fmt.Errorf("added token %q: single_word/lstrip/rstrip/normalized are not supported", a.Content)
		}
		if a.Content == "" || a.ID < 0 {
			return nil, fmt.Errorf("added token id %d: empty content or negative id", a.ID)
		}
		if t.present[a.ID] && !bytes.Equal(t.idBytes[a.ID], []byte(a.Content)) {
			return nil, fmt.Errorf("added token %q reuses vocab id %d", a.Content, a.ID)
		}
		at := AddedToken{ID: a.ID, Content: a.Content, Special: a.Special}
		t.idBytes[a.ID], t.present[a.ID], t.special[a.ID] = []byte(a.Content), true, a.Special
		t.added = append(t.added, at)
		t.addedByID[a.ID] = at
		t.addedStart[a.Content[0]] = true
	}
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].Content) > len(t.added[j].Content) })
	return t, nil
}

func splitPattern(p *componentJSON) (string, error) {
	if p == nil || p.Type != "Sequence" || len(p.Pretokenizers) != 2 {
		return "", fmt.Errorf("pre_tokenizer: want Sequence[Split, ByteLevel]")
	}
	s, bl := p.Pretokenizers[0], p.Pretokenizers[1]
	if s.Type != "Split" || s.Pattern == nil || s.Pattern.Regex == nil || s.Behavior != "Isolated" || s.Invert {
		return "", fmt.Errorf("pre_tokenizer: want Split(Regex, Isolated, invert=false) first")
	}
	if bl.Type != "ByteLevel" || bl.AddPrefixSpc || bl.UseRegex == nil || *bl.UseRegex {
		return "", fmt.Errorf("pre_tokenizer: want ByteLevel(add_prefix_space=false, use_regex=false) second")
	}
	return *s.Pattern.Regex, nil
}

func parseMerge(raw json.RawMessage) (string, string, error) {
	var pair []string
	if err := json.Unmarshal(raw, &pair); err == nil {
		if len(pair) != 2 {
			return "", "", fmt.Errorf("want 2 parts, got %d", len(pair))
		}
		return pair[0], pair[1], nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "", fmt.Errorf("neither [a, b] nor \"a b\": %s", raw)
	}
	l, r, ok := strings.Cut(s, " ")
	if !ok || strings.Contains(r, " ") {
		return "", "", fmt.Errorf("%q is not two space-separated parts", s)
	}
	return l, r, nil
}

// VocabSize is the number of ids including added tokens (HF's
// get_vocab_size(with_added_tokens=True); 151,669 for Qwen3). The model's
// embedding matrix may be larger (padded).
func (t *Tokenizer) VocabSize() int { return len(t.idBytes) }

// AddedTokenID returns the id of an added token such as "<|im_end|>".
func (t *Tokenizer) AddedTokenID(content string) (int32, bool) {
	for _, a := range t.added {
		if a.Content == content {
			return a.ID, true
		}
	}
	return 0, false
}

// AddedTokens lists the added tokens in id order.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, 0, len(t.added))
	for _, a := range t.addedByID {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// IsSpecial reports whether id is an added token flagged special.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

// TokenBytes returns the raw bytes of one token (a token may be part of a
// multi-byte character, so this is not always valid UTF-8). The slice must
// not be modified.
func (t *Tokenizer) TokenBytes(id int32) ([]byte, bool) {
	if id < 0 || int(id) >= len(t.idBytes) || !t.present[id] {
		return nil, false
	}
	return t.idBytes[id], true
}

// Encode tokenizes text as HF's encode(text, add_special_tokens=False): added
// tokens written in the text become their ids, everything else is
// NFC-normalized, split and BPE-merged. Invalid UTF-8 is first replaced by
// U+FFFD (HF only accepts valid strings).
func (t *Tokenizer) Encode(text string) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/3+4), text)
}

// AppendEncode appends the ids of text to dst and returns the extended slice.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	t.splitAdded(text, func(seg string, added int32, isAdded bool) {
		if isAdded {
			dst = append(dst, added)
		} else {
			dst = t.appendSegment(dst, seg)
		}
	})
	return dst
}

// Normalize returns the text that Encode actually tokenizes and Decode
// returns: invalid UTF-8 replaced by U+FFFD and NFC applied to each segment
// between added tokens (so Decode(Encode(s)) == Normalize(s) for every s).
func (t *Tokenizer) Normalize(text string) string {
	var sb strings.Builder
	t.splitAdded(text, func(seg string, _ int32, isAdded bool) {
		if !isAdded && t.normalizeNFC {
			seg = norm.NFC.String(seg)
		}
		sb.WriteString(seg)
	})
	return sb.String()
}

// splitAdded calls fn for each segment of text in order: plain text segments
// (never empty) and added tokens, matched leftmost-longest as HF's
// AddedVocabulary does.
func (t *Tokenizer) splitAdded(text string, fn func(seg string, id int32, isAdded bool)) {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	start := 0
	for i := 0; i < len(text); i++ {
		if !t.addedStart[text[i]] {
			continue
		}
		id, n := t.matchAdded(text[i:])
		if n == 0 {
			continue
		}
		if i > start {
			fn(text[start:i], 0, false)
		}
		fn(text[i:i+n], id, true)
		start = i + n
		i = start - 1
	}
	if start < len(text) {
		fn(text[start:], 0, false)
	}
}

// EncodeOrdinary tokenizes text treating added-token strings as plain text
// (HF's split_special_tokens=True), for text that must never inject control
// tokens.
func (t *Tokenizer) EncodeOrdinary(text string) []int32 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	return t.appendSegment(make([]int32, 0, len(text)/3+4), text)
}

func (t *Tokenizer) matchAdded(s string) (int32, int) {
	for _, a := range t.added { // longest first
		if strings.HasPrefix(s, a.Content) {
			return a.ID, len(a.Content)
		}
	}
	return 0, 0
}

func (t *Tokenizer) appendSegment(dst []int32, seg string) []int32 {
	if seg == "" {
		return dst
	}
	if t.normalizeNFC && !norm.NFC.IsNormalString(seg) {
		seg = norm.NFC.String(seg)
	}
	runes := []rune(seg)
	offs := make([]int, len(runes)+1)
	o := 0
	for i, r := range runes {
		offs[i] = o
		o += utf8.RuneLen(r)
	}
	offs[len(runes)] = o
	m, err := t.split.FindRunesMatch(runes)
	covered := 0
	for err == nil && m != nil {
		a, b := m.Index, m.Index+m.Length
		if a > covered { // Isolated split keeps unmatched text as pieces too
			dst = t.appendPiece(dst, seg[offs[covered]:offs[a]])
		}
		if b > a {
			dst = t.appendPiece(dst, seg[offs[a]:offs[b]])
		}
		covered = b
		m, err = t.split.FindNextMatch(m)
	}
	if err != nil { // unreachable: the only matcher error is a timeout, disabled in Parse
		panic(fmt.Sprintf("tokenizer: split regex: %v", err))
	}
	if covered < len(runes) {
		dst = t.appendPiece(dst, seg[offs[covered]:])
	}
	return dst
}

func (t *Tokenizer) appendPiece(dst []int32, piece string) []int32 {
	if len(piece) == 1 {
		return append(dst, t.byteID[piece[0]])
	}
	cacheable := len(piece) <= cacheMaxPiece
	if cacheable {
		t.cacheMu.RLock()
		ids, ok := t.cache[piece]
		t.cacheMu.RUnlock()
		if ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	dst = t.mergeWord(dst, piece)
	if cacheable {
		ids := append([]int32(nil), dst[start:]...)
		t.cacheMu.Lock()
		if len(t.cache) < cacheLimit {
			t.cache[strings.Clone(piece)] = ids
		}
		t.cacheMu.Unlock()
	}
	return dst
}
