package main

import (
	"tau2rl/cmd/internal/cli"
	"tau2rl/tau2/episode"
)

// The ConfigNotes of the sub-commands say where the τ² data (and, for run in token mode, the
// tokenizer) resolve under --print-config, through lib/assets as the command will resolve them.

func (c *gradeConfig) ConfigNotes() []string { return []string{cli.DataNote("data_dir", c.DataDir)} }

func (c *synthConfig) ConfigNotes() []string { return []string{cli.DataNote("data_dir", c.DataDir)} }

func (c *runConfig) ConfigNotes() []string {
	notes := []string{cli.DataNote("data_dir", c.DataDir)}
	if c.Policy.Mode == episode.ModeToken {
		notes = append(notes, cli.TokenizerNote("policy.tokenizer", c.Policy.Tokenizer))
	}
	return notes
}
