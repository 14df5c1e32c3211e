// Package tokenizer is a pure-Go Qwen3 (Qwen2-family byte-level BPE) tokenizer
// that produces exactly the ids of Hugging Face's Rust `tokenizers` for the
// same tokenizer.json.
//
// Why exact: tau2rl trains on the token ids the policy saw and produced. The
// producer renders prompts and tokenizes them itself before sending token ids
// to SGLang or vLLM, so any difference from the tokenizer those servers use
// would put text in front of the model that it never learned to read.
//
// The pipeline is Hugging Face's, step by step, for a tokenizer.json of the
// shape Qwen ships (validated at load; other shapes are rejected with an
// error rather than tokenized approximately):
//
//  1. Added tokens (`<|im_start|>`, `<tool_call>`, `<think>`, …; all have
//     normalized=false) are split out of the raw text first, leftmost-longest,
//     as HF's AddedVocabulary does. Besides being correct, this keeps encoding
//     linear: the remaining segments never contain specials.
//  2. Each remaining segment is NFC-normalized (golang.org/x/text/unicode/norm).
//  3. The Split pre-tokenizer's regex runs on the segment with
//     github.com/dlclark/regexp2, a backtracking engine that supports the
//     pattern's `(?!\S)` lookahead and whose `\s`, `\p{L}` and `\p{N}` match
//     Oniguruma's (including U+0085 as space and U+FEFF as not).
//  4. Each piece's bytes are BPE-merged with HF's algorithm (a priority queue
//     of adjacent pairs keyed by merge rank, leftmost first on ties), starting
//     from the 256 byte-level symbols. The merge table is keyed by the pair of
//     symbol ids, as in HF, not by the merged string as in tiktoken.
//
// Decoding maps ids back to bytes (the inverse of GPT-2's bytes_to_unicode)
// and converts invalid UTF-8 the way Rust's String::from_utf8_lossy does.
//
// Reference checks: tokenizer_test.go compares against golden ids produced by
// the npm package tokenizers@0.23.2 (HF's Rust library through napi), and,
// when node and testdata/oracle/node_modules are present, against the live
// oracle on a few thousand generated strings.
package tokenizer
