package main

import (
	"os"
	"path/filepath"

	"tau2rl/cmd/internal/cli"
)

// ConfigNotes says which tokenizer the sampler will load (--print-config), in loadTokenizer's
// order: the tokenizer key, else the model directory's tokenizer.json, else lib/assets' order.
func (c *Config) ConfigNotes() []string {
	switch {
	case c.Tokenizer == "none":
		return []string{"tokenizer → none (token ids only)"}
	case c.Tokenizer == "" && c.Model != "":
		if _, err := os.Stat(filepath.Join(c.Model, "tokenizer.json")); err == nil {
			return []string{"tokenizer → " + filepath.Join(c.Model, "tokenizer.json") + " (the model's)"}
		}
	}
	return []string{cli.TokenizerNote("tokenizer", c.Tokenizer)}
}
