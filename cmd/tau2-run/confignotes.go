package main

import "tau2rl/cmd/internal/cli"

// ConfigNotes says where the τ² data and the tokenizer resolve (--print-config); the run resolves
// them once, through lib/assets, and hands the directories to every process it starts.
func (c *config) ConfigNotes() []string {
	return []string{cli.DataNote("data_dir", c.DataDir), cli.TokenizerNote("tokenizer", "")}
}

// ConfigNotes says where the τ² data resolves (--print-config).
func (c *expConfig) ConfigNotes() []string {
	return []string{cli.DataNote("data_dir", c.DataDir), cli.TokenizerNote("tokenizer", "")}
}
