package tokenizer

import (
	"math/rand/v2"
	"strings"
)

// handCases are strings chosen to hit every branch of the split regex, NFC,
// the added-token splitter and the places where regex engines disagree.
var handCases = []string{
	"", "Hello", "!", " ", "  ", "\n", "\n\n\n", "\t", "a", "é",
	"Hello world! How are you doing today?",
	"The quick brown fox jumps over the lazy dog.  Twice.   ",
	"I'm sure they'll say we've done it, isn't it? He'd, she's, you're.",
	"I'M SURE THEY'LL SAY WE'VE DONE IT. HE'D. SHE'S. YOU'RE.",
	"'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'Re 'rE",
	"long s: 'ſ and 'ſt and Kelvin 'K and dotted 'İ",
	"你好，世界！这是一个测试。我们在测试分词器。",
	"日本語のテキストとカタカナ、ひらがな。",
	"한국어 텍스트입니다. ㅎㅏㄴ",
	"مرحبا بالعالم ١٢٣٤٥٦ and ۱۲۳",
	"नमस्ते दुनिया, यह एक परीक्षण है।",
	"Ελληνικά κείμενα και русский текст.",
	"emoji: 😀😃😄 👨‍👩‍👧‍👦 family, 🇫🇷🇩🇪 flags, 👍🏽 tone, ❤️ heart",
	"numbers 0 12 345 6789 3.14159 -42 1e10 1,000,000",
	"code:\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
	"def f(x):\n    return x ** 2  # square\n\n\nclass A:\n    pass\n",
	"trailing spaces   \nand tabs\t\t\nmixed \t \n",
	"CRLF line\r\nnext\r\n\r\nlast\r",
	"bare CR\rin\rtext",
	"NEL\u0085here and\u0085\u0085twice, BOM\ufeffhere\ufeff\ufeff",
	"\u0085leading NEL", "\ufeffleading BOM", "trailing NEL\u0085", "trailing BOM\ufeff",
	"NBSP\u00a0here, em space\u2003here, ZWSP\u200bhere, ideographic\u3000space",
	"line sep\u2028para sep\u2029end",
	"combining: e\u0301 a\u0300 o\u0308 n\u0303 vs é à ö ñ",
	"Hangul jamo: \u1100\u1161\u11a8 and precomposed 각",
	"Å vs A\u030a and Ω vs \u2126 (ohm) and K vs \u212a (kelvin)",
	"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
	"<think>\nLet me think about this.\n</think>\n\nThe answer is 4.",
	"<tool_call>\n{\"name\": \"get_user_details\", \"arguments\": {\"user_id\": \"mia_li_3668\"}}\n</tool_call>",
	"<|im_start|>user\n<tool_response>\n{\"status\": \"ok\"}\n</tool_response><|im_end|>\n",
	"<|vision_start|><|image_pad|><|vision_end|><|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>c<|fim_pad|><|repo_name|>r<|file_sep|>",
	"<|endoftext|><|endoftext|><|im_end|>",
	"partial <|im_start| and <|im_end and < | im_start | > and <think and </tool_call",
	"<<|im_start|>> <<think>> <|im_start|im_start|> </think></think>",
	"xml-ish: <tools>\n{\"type\": \"function\"}\n</tools> <b>bold</b> &amp; &lt;",
	"json: {\"a\": [1, 2, 3], \"b\": {\"c\": null, \"d\": true, \"e\": \"x\\ny\"}}",
	"urls https://example.com/path?q=1&r=2#frag and emails a.b+c@d.co",
	"punctuation!!! ??? ... --- *** ### ###STOP### ###TRANSFER### ###OUT-OF-SCOPE###",
	"    indented four\n        eight\n\t\ttabs",
	"a\n\nb\n \nc \n d",
	"   ", "\n \n", " \n", "\t\n\t",
	"$100.00 €50 £20 ¥1000 ₹500",
	"snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
	"\x00\x01\x02 control \x7f chars \x1b[0m",
	"math: ∑ ∫ √ ∞ ≤ ≥ ≠ ± × ÷ α β γ",
	"mixed👋text😊with🎉emoji",
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	strings.Repeat("ab", 300),
	strings.Repeat(" ", 100) + "x",
	strings.Repeat("\n", 50),
	strings.Repeat("😀", 40),
	strings.Repeat("0123456789", 20),
}

// fuzzPools are the building blocks of generated strings.
var fuzzPools = [][]string{
	strings.Split("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", ""),
	strings.Split("0123456789", ""),
	strings.Split(" !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", ""),
	{" ", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\v", "\f", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u200b", "\u180e"},
	{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'ſ", "n't"},
	{"é", "ü", "ñ", "ß", "ø", "å", "ç", "e\u0301", "a\u0308", "\u0301", "\u0327", "\u1100\u1161", "Å", "\u212b"},
	{"中", "文", "字", "日", "本", "語", "한", "국", "ア", "イ", "ㄱ"},
	{"😀", "👨‍👩‍👧", "🇺🇸", "👍🏿", "❤️", "🎉", "\U0001F9D1\u200d\U0001F4BB", "\U0001FAE0"},
	{"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "<|im_start", "<", "|>"},
	{"١", "٢", "۳", "०", "१", "²", "½", "Ⅳ", "𝟙"},
}

// randomRune draws from all of Unicode except surrogates, weighted to the BMP.
func randomRune(r *rand.Rand) rune {
	for {
		var c rune
		if r.IntN(4) == 0 {
			c = rune(0x10000 + r.IntN(0x10FFFF-0x10000))
		} else {
			c = rune(r.IntN(0x10000))
		}
		if c >= 0xD800 && c <= 0xDFFF {
			continue
		}
		return c
	}
}

// fuzzStrings generates n strings deterministically from seed.
func fuzzStrings(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]string, 0, n)
	for range n {
		var sb strings.Builder
		parts := 1 + r.IntN(24)
		for range parts {
			if r.IntN(8) == 0 {
				sb.WriteRune(randomRune(r))
				continue
			}
			pool := fuzzPools[r.IntN(len(fuzzPools))]
			sb.WriteString(pool[r.IntN(len(pool))])
		}
		out = append(out, sb.String())
	}
	return out
}
