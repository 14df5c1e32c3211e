package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EnvDir names the environment variable that points at a directory holding
// the Qwen3 tokenizer.json and tokenizer_config.json.
const EnvDir = "QWEN3_TOKENIZER_DIR"

// ErrNotFound is returned (wrapped, with what to set) by LocateQwen3 when no
// tokenizer directory exists.
var ErrNotFound = errors.New("tokenizer: Qwen3 tokenizer directory not found")

// LocateQwen3 finds the shared Qwen3 tokenizer directory for tests and dev
// tools: $QWEN3_TOKENIZER_DIR if set, else the first ../shared/qwen3-tokenizer
// found walking up from the working directory (the layout the repository
// and CI use: shared/ next to the module root).
func LocateQwen3() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		if _, err := os.Stat(filepath.Join(d, "tokenizer.json")); err != nil {
			return "", fmt.Errorf("tokenizer: $%s=%s: %w", EnvDir, d, err)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		cand := filepath.Join(dir, "..", "shared", "qwen3-tokenizer")
		if _, err := os.Stat(filepath.Join(cand, "tokenizer.json")); err == nil {
			return filepath.Clean(cand), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%w: set $%s to a directory holding Qwen3's tokenizer.json (no ../shared/qwen3-tokenizer above %s)", ErrNotFound, EnvDir, wd)
		}
	}
}
