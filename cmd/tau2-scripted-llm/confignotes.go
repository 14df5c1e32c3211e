package main

import "tau2rl/cmd/internal/cli"

// ConfigNotes says where the τ² data and the tokenizer resolve (--print-config), through
// lib/assets as the server will resolve them.
func (c *Config) ConfigNotes() []string {
	return []string{cli.DataNote("data_dir", c.DataDir), cli.TokenizerNote("tokenizer", c.Tokenizer)}
}
