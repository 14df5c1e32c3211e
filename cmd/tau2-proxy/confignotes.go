package main

import "tau2rl/cmd/internal/cli"

// ConfigNotes says where the tokenizer resolves (--print-config), through lib/assets as
// episode.LoadTokenizer will resolve it.
func (c *Config) ConfigNotes() []string {
	return []string{cli.TokenizerNote("tokenizer", c.Tokenizer)}
}
