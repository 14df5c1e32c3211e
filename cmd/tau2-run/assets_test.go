package main

import (
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestAssetsFromShared (issue 27 item 14): tau2-run and tau2-run experiment find the τ² data and
// the tokenizer in ../shared as every binary does.
func TestAssetsFromShared(t *testing.T) {
	cfg := defaultConfig()
	clitest.AssetsFromShared(t, &cfg, nil, []string{"data_dir"}, []string{"tokenizer"})
	exp := defaultExpConfig()
	clitest.AssetsFromShared(t, &exp, nil, []string{"data_dir"}, []string{"tokenizer"})
}
