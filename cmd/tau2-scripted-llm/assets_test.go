package main

import (
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestAssetsFromShared (issue 27 item 14): the scripted server finds the τ² data and the
// tokenizer in ../shared as every binary does.
func TestAssetsFromShared(t *testing.T) {
	cfg := DefaultConfig()
	clitest.AssetsFromShared(t, &cfg, nil, []string{"data_dir"}, []string{"tokenizer"})
}
