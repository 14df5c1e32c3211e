// Package tokenizertest gives tests the real Qwen3 tokenizer (../shared/qwen3-tokenizer or
// $QWEN3_TOKENIZER_DIR), loaded once per test binary, and skips a test with a clear message where
// the tokenizer is not present. Tests of every package that tokenizes use it, so they all find and
// report the tokenizer the same way.
package tokenizertest

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"tau2rl/lib/inference/tokenizer"
)

var (
	once sync.Once
	dir  string
	tok  *tokenizer.Tokenizer
	err  error
)

func load() {
	if dir, err = tokenizer.LocateQwen3(); err == nil {
		tok, err = tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	}
}

// Dir returns the directory holding Qwen3's tokenizer.json and tokenizer_config.json, or skips tb.
func Dir(tb testing.TB) string {
	tb.Helper()
	Qwen3(tb)
	return dir
}

// Path returns the path of Qwen3's tokenizer.json, or skips tb.
func Path(tb testing.TB) string {
	return filepath.Join(Dir(tb), "tokenizer.json")
}

// Qwen3 returns the shared Qwen3 tokenizer, or skips tb when it is not present; any other error
// fails tb.
func Qwen3(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	once.Do(load)
	if errors.Is(err, tokenizer.ErrNotFound) {
		tb.Skipf("Qwen3 tokenizer not found (set %s or put it at ../shared/qwen3-tokenizer): %v", tokenizer.EnvDir, err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
