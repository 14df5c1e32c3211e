package main

import (
	"tau2rl/cmd/internal/cli"
	"tau2rl/tau2/episode"
)

// ConfigNotes says where the τ² data and, in token mode, the tokenizer resolve (--print-config),
// through lib/assets as the episode runners will resolve them.
func (c *Config) ConfigNotes() []string {
	if c.Mode != "tau2" {
		return nil
	}
	notes := []string{cli.DataNote("data_dir", c.DataDir)}
	if c.Policy.Mode == episode.ModeToken {
		notes = append(notes, cli.TokenizerNote("policy.tokenizer", c.Policy.Tokenizer))
	}
	return notes
}
