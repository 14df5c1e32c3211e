package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"tau2rl/lib/inference/tokenizer/hforacle"
)

var update = flag.Bool("update", false, "regenerate golden files from the npm oracle (needs node and npm ci)")

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenDir  string
	qwenErr  error
)

// qwen3 loads the shared Qwen3 tokenizer once per test binary, skipping the
// test when the shared directory is absent.
func qwen3(t testing.TB) (*Tokenizer, string) {
	t.Helper()
	qwenOnce.Do(func() {
		qwenDir, qwenErr = LocateQwen3()
		if qwenErr == nil {
			qwenTok, qwenErr = Load(qwenDir)
		}
	})
	if errors.Is(qwenErr, ErrNotFound) {
		t.Skipf("Qwen3 tokenizer not found: set $%s or provide ../shared/qwen3-tokenizer", EnvDir)
	}
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok, qwenDir
}

type encodeCase struct {
	Text        string  `json:"text"`
	IDs         []int32 `json:"ids"`
	Decoded     string  `json:"decoded"`
	DecodedSkip string  `json:"decoded_skip"`
}

type decodeCase struct {
	IDs         []int32 `json:"ids"`
	Decoded     string  `json:"decoded"`
	DecodedSkip string  `json:"decoded_skip"`
}

func goldenEncodeInputs() []string {
	return append(slices.Clone(handCases), fuzzStrings(1, 400)...)
}

// decodeInputs cuts encodings of multi-byte text at every position, so that
// partial characters reach the lossy UTF-8 conversion.
func decodeInputs(tk *Tokenizer) [][]int32 {
	var out [][]int32
	for _, s := range []string{"😀😃 👨‍👩‍👧‍👦 🇫🇷", "你好，世界", "é\u0301ñ", "<|im_start|>a<|im_end|>😀<think>"} {
		ids := tk.Encode(s)
		for i := 0; i <= len(ids); i++ {
			for j := i; j <= len(ids); j++ {
				out = append(out, slices.Clone(ids[i:j]))
			}
		}
	}
	// Single byte tokens of every value.
	for b := 0; b < 256; b++ {
		out = append(out, []int32{tk.byteID[b]})
	}
	return out
}

func runOracle(t *testing.T, mode, resource string, cases, out any) {
	t.Helper()
	if err := hforacle.Available(); err != nil {
		if os.Getenv("TAU2RL_REQUIRE_ORACLE") != "" {
			t.Fatal(err)
		}
		t.Skipf("npm oracle unavailable (%v); install with: %s", err, hforacle.InstallHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := hforacle.Run(ctx, mode, resource, cases, out); err != nil {
		t.Fatal(err)
	}
}

func writeGolden(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readGolden(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("%v (regenerate with go test ./lib/inference/tokenizer -run TestGolden -update)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func TestGoldenEncode(t *testing.T) {
	tk, dir := qwen3(t)
	if *update {
		inputs := goldenEncodeInputs()
		var res []encodeCase
		runOracle(t, "tokenize", filepath.Join(dir, "tokenizer.json"), inputs, &res)
		for i := range res {
			res[i].Text = inputs[i]
		}
		writeGolden(t, "golden_encode.json", res)
	}
	var cases []encodeCase
	readGolden(t, "golden_encode.json", &cases)
	if len(cases) < 400 {
		t.Fatalf("golden file has only %d cases", len(cases))
	}
	for i, c := range cases {
		checkEncode(t, tk, i, c)
	}
}

func checkEncode(t *testing.T, tk *Tokenizer, i int, c encodeCase) {
	t.Helper()
	got := tk.Encode(c.Text)
	if !slices.Equal(got, c.IDs) {
		t.Errorf("case %d %+q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
		return
	}
	dec, err := tk.Decode(c.IDs)
	if err != nil || dec != c.Decoded {
		t.Errorf("case %d decode %+q: got %+q, %v; want %+q", i, c.Text, dec, err, c.Decoded)
	}
	skip, err := tk.DecodeSkipSpecial(c.IDs)
	if err != nil || skip != c.DecodedSkip {
		t.Errorf("case %d decode skip-special %+q: got %+q, %v; want %+q", i, c.Text, skip, err, c.DecodedSkip)
	}
}

func TestGoldenDecode(t *testing.T) {
	tk, dir := qwen3(t)
	if *update {
		inputs := decodeInputs(tk)
		var res []decodeCase
		runOracle(t, "decode", filepath.Join(dir, "tokenizer.json"), inputs, &res)
		for i := range res {
			res[i].IDs = inputs[i]
		}
		writeGolden(t, "golden_decode.json", res)
	}
	var cases []decodeCase
	readGolden(t, "golden_decode.json", &cases)
	for i, c := range cases {
		got, err := tk.Decode(c.IDs)
		if err != nil || got != c.Decoded {
			t.Errorf("case %d %v: got %+q, %v; want %+q", i, c.IDs, got, err, c.Decoded)
		}
		got, err = tk.DecodeSkipSpecial(c.IDs)
		if err != nil || got != c.DecodedSkip {
			t.Errorf("case %d %v skip-special: got %+q, %v; want %+q", i, c.IDs, got, err, c.DecodedSkip)
		}
	}
}

// tau2Docs returns the policy and guideline documents of the shared τ² data,
// if present: real text of the kind the producer tokenizes.
func tau2Docs(t *testing.T) []string {
	dir := os.Getenv("TAU2_DATA_DIR")
	if dir == "" {
		wd, _ := os.Getwd()
		for d := wd; ; d = filepath.Dir(d) {
			cand := filepath.Join(d, "..", "shared", "tau2-data")
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				dir = cand
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if dir == "" {
		t.Log("τ² data not found; live oracle test runs without real documents")
		return nil
	}
	var docs []string
	for _, pat := range []string{"tau2/domains/*/*.md", "tau2/user_simulator/*.md", "derived/*.json"} {
		files, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 400_000 {
				b = b[:400_000]
			}
			docs = append(docs, strings.ToValidUTF8(string(b), "\uFFFD"))
		}
	}
	return docs
}

// TestOracleLive compares with HF's Rust tokenizer directly on a larger
// corpus: the hand cases, 5,000 generated strings and the τ² documents.
func TestOracleLive(t *testing.T) {
	tk, dir := qwen3(t)
	inputs := append(append(slices.Clone(handCases), fuzzStrings(2, 5000)...), tau2Docs(t)...)
	var res []encodeCase
	runOracle(t, "tokenize", filepath.Join(dir, "tokenizer.json"), inputs, &res)
	if len(res) != len(inputs) {
		t.Fatalf("oracle returned %d results for %d inputs", len(res), len(inputs))
	}
	tokens := 0
	for i := range res {
		res[i].Text = inputs[i]
		tokens += len(res[i].IDs)
		checkEncode(t, tk, i, res[i])
	}
	t.Logf("%d strings, %d tokens equal to HF tokenizers", len(inputs), tokens)
}

func TestKnownIDs(t *testing.T) {
	tk, _ := qwen3(t)
	if got := tk.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d, want 151669", got)
	}
	for _, c := range []struct {
		text string
		ids  []int32
	}{
		{"Hello", []int32{9707}},
		{"!", []int32{0}},
		{"\n", []int32{198}},
		{"<|im_start|>system\n", []int32{151644, 8948, 198}},
		{"<|im_end|>", []int32{151645}},
		{"<tool_call></tool_call><think></think>", []int32{151657, 151658, 151667, 151668}},
	} {
		if got := tk.Encode(c.text); !slices.Equal(got, c.ids) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.ids)
		}
	}
	for content, id := range map[string]int32{"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_response>": 151665, "</think>": 151668} {
		if got, ok := tk.AddedTokenID(content); !ok || got != id {
			t.Errorf("AddedTokenID(%q) = %d, %v; want %d", content, got, ok, id)
		}
	}
	if !tk.IsSpecial(151645) || tk.IsSpecial(151657) || tk.IsSpecial(9707) || tk.IsSpecial(-1) {
		t.Error("IsSpecial: want <|im_end|> special, <tool_call> and text not")
	}
	if n := len(tk.AddedTokens()); n != 26 {
		t.Errorf("AddedTokens: %d, want 26", n)
	}
}

func TestEncodeOrdinaryIgnoresSpecials(t *testing.T) {
	tk, _ := qwen3(t)
	ids := tk.EncodeOrdinary("<|im_end|>")
	if slices.Contains(ids, 151645) || len(ids) < 2 {
		t.Errorf("EncodeOrdinary produced the special id: %v", ids)
	}
	if s, _ := tk.Decode(ids); s != "<|im_end|>" {
		t.Errorf("round trip: %q", s)
	}
}

func TestDecodeErrors(t *testing.T) {
	tk, _ := qwen3(t)
	for _, ids := range [][]int32{{-1}, {151669}, {9707, 1 << 30}} {
		if _, err := tk.Decode(ids); err == nil {
			t.Errorf("Decode(%v): want error", ids)
		}
	}
}

func TestInvalidUTF8Input(t *testing.T) {
	tk, _ := qwen3(t)
	got := tk.Encode("a\xffb")
	want := tk.Encode("a\uFFFDb")
	if !slices.Equal(got, want) {
		t.Errorf("invalid UTF-8: got %v, want %v", got, want)
	}
}

func TestLossyUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\xe2\x82", "\uFFFD"},                 // truncated 3-byte sequence: one replacement
		{"\xe2\x82x", "\uFFFDx"},               // same, followed by ASCII
		{"\xff\xfe", "\uFFFD\uFFFD"},           // two invalid bytes: two replacements
		{"\xf0\x9f\x98", "\uFFFD"},             // truncated emoji
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED A0 is invalid at the second byte
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"}, // overlong
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xc3", "\uFFFD"},
		{"é\xc3", "é\uFFFD"},
	} {
		if got := LossyUTF8([]byte(c.in)); got != c.want {
			t.Errorf("LossyUTF8(%q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}

func TestParseRejectsUnsupported(t *testing.T) {
	base := `{"added_tokens":[],"normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\s+|\\S+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]},"decoder":{"type":"ByteLevel"},"model":{"type":"%s","byte_fallback":false,"vocab":%s,"merges":%s}}`
	vocab := byteVocab()
	cases := []struct {
		name, json string
	}{
		{"not json", "{"},
		{"wordpiece", fmt.Sprintf(base, "WordPiece", vocab, "[]")},
		{"missing byte", fmt.Sprintf(base, "BPE", `{"a":0}`, "[]")},
		{"merge missing", fmt.Sprintf(base, "BPE", vocab, `[["a","b"]]`)},
		{"merge bad shape", fmt.Sprintf(base, "BPE", vocab, `[["a"]]`)},
		{"normalizer", strings.Replace(fmt.Sprintf(base, "BPE", vocab, "[]"), `"NFC"`, `"NFKC"`, 1)},
		{"bad regex", strings.Replace(fmt.Sprintf(base, "BPE", vocab, "[]"), `\\s+|\\S+`, `(`, 1)},
	}
	for _, c := range cases {
		if _, err := Parse([]byte(c.json)); err == nil {
			t.Errorf("%s: want error", c.name)
		}
	}
	if _, err := Parse([]byte(fmt.Sprintf(base, "BPE", vocab, "[]"))); err != nil {
		t.Errorf("minimal valid tokenizer rejected: %v", err)
	}
}

// byteVocab is a vocabulary of just the 256 byte-level symbols.
func byteVocab() string {
	enc := byteToUnicode()
	m := make(map[string]int, 256)
	for b, r := range enc {
		m[string(r)] = b
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func TestMiniBPE(t *testing.T) {
	// A tiny tokenizer with string-form merges: "a b" then "ab c", plus an
	// added token; checks merge order, the "a b" merge syntax and splitting.
	enc := byteToUnicode()
	vocab := map[string]int{}
	for b, r := range enc {
		vocab[string(r)] = b
	}
	vocab["ab"], vocab["abc"], vocab["bc"] = 256, 257, 258
	vb, _ := json.Marshal(vocab)
	js := fmt.Sprintf(`{"added_tokens":[{"id":259,"content":"<x>","special":true}],"normalizer":null,
	 "pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\s+|\\S+"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]},
	 "model":{"type":"BPE","vocab":%s,"merges":["a b","ab c","b c"]}}`, vb)
	tk, err := Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want []int32
	}{
		{"abc", []int32{257}},
		{"bc", []int32{258}},
		{"abcbc", []int32{257, 258}},
		{"ab<x>c", []int32{256, 259, 'c'}},
		{"a bc", []int32{'a', ' ', 258}},
	} {
		if got := tk.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	if got, _ := tk.DecodeSkipSpecial([]int32{256, 259}); got != "ab" {
		t.Errorf("DecodeSkipSpecial = %q", got)
	}

	// Merges are keyed by symbol pairs, as in HF: with "b c" ranked first,
	// "abc" becomes [a, bc], and no merge joins (a, bc) even though "abc" is
	// in the vocabulary (a tiktoken-style merge by string rank would join it).
	tk2, err := Parse([]byte(strings.Replace(js, `["a b","ab c","b c"]`, `["b c","a b","ab c"]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := tk2.Encode("abc"); !slices.Equal(got, []int32{'a', 258}) {
		t.Errorf("pair-keyed merges: Encode(abc) = %v, want [97 258]", got)
	}
}

func FuzzEncodeRoundTrip(f *testing.F) {
	for _, s := range handCases {
		f.Add(s)
	}
	tk, _ := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tk.Encode(s)
		got, err := tk.Decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		if want := tk.Normalize(s); got != want {
			t.Fatalf("round trip %+q: decoded %+q, want %+q", s, got, want)
		}
		if !utf8.ValidString(s) {
			return
		}
		if norm.NFC.IsNormalString(s) && !strings.Contains(s, "\uFFFD") && got != s {
			t.Fatalf("NFC input %+q changed: %+q", s, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("decode produced invalid UTF-8 for %+q", s)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	tk, _ := qwen3(b)
	docs := benchDocs(b)
	total := 0
	for _, d := range docs {
		total += len(tk.Encode(d))
	}
	b.ResetTimer()
	for b.Loop() {
		for _, d := range docs {
			tk.Encode(d)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeUncached measures BPE merging without the piece cache.
func BenchmarkEncodeUncached(b *testing.B) {
	tk, _ := qwen3(b)
	docs := benchDocs(b)
	total := 0
	for _, d := range docs {
		total += len(tk.Encode(d))
	}
	b.ResetTimer()
	for b.Loop() {
		tk.cacheMu.Lock()
		clear(tk.cache)
		tk.cacheMu.Unlock()
		for _, d := range docs {
			tk.Encode(d)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecode(b *testing.B) {
	tk, _ := qwen3(b)
	var ids []int32
	for _, d := range benchDocs(b) {
		ids = append(ids, tk.Encode(d)...)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := tk.Decode(ids); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// benchDocs is a chat-like mix: a long policy-like text, code, JSON, CJK.
func benchDocs(b *testing.B) []string {
	b.Helper()
	var sb strings.Builder
	for i := range 200 {
		fmt.Fprintf(&sb, "## Rule %d\nThe agent must verify the user's identity before changing reservation %d. "+
			"If the user asks for a refund, check the membership tier and the cabin class.\n", i, 1000+i)
	}
	var js strings.Builder
	for i := range 200 {
		fmt.Fprintf(&js, `{"name": "get_reservation_details", "arguments": {"reservation_id": "R%05d", "flights": [{"flight_number": "HAT%03d", "date": "2024-05-%02d"}]}}`+"\n", i, i%300, 1+i%28)
	}
	return []string{
		sb.String(),
		js.String(),
		strings.Repeat("你好，世界！这是一个测试。我们在测试分词器的速度。", 100),
		strings.Repeat("<|im_start|>user\nHello, I want to change my flight.<|im_end|>\n<|im_start|>assistant\n<think>\nOk.\n</think>\n\nSure.<|im_end|>\n", 100),
	}
}
