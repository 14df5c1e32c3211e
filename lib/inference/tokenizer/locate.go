package tokenizer

import (
	"fmt"

	"tau2rl/lib/assets"
)

// EnvDir names the environment variable that points at a directory holding
// the Qwen3 tokenizer.json (and tokenizer_config.json).
const EnvDir = "QWEN3_TOKENIZER_DIR"

// LocateQwen3 finds the Qwen3 tokenizer directory with lib/assets
// (docs/ASSETS.md): $QWEN3_TOKENIZER_DIR if set, else ../shared/qwen3-tokenizer
// next to the working directory or a parent, else the cache of a previous
// download, else a download of the pinned Hugging Face revision (unless
// TAU2RL_OFFLINE=1). The error says what to set (QWEN3_TOKENIZER_DIR, or the
// binary's policy.tokenizer).
func LocateQwen3() (string, error) {
	d, err := assets.Qwen3TokenizerDir()
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w (or point policy.tokenizer at a tokenizer.json)", err)
	}
	return d, nil
}
