package main

import (
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestAssetsFromShared (issue 27 item 14): a model directory without tokenizer.json, the sampler
// finds the tokenizer in ../shared as every binary does.
func TestAssetsFromShared(t *testing.T) {
	cfg := DefaultConfig()
	clitest.AssetsFromShared(t, &cfg, []string{"model=" + t.TempDir()}, nil, []string{"tokenizer"})
}

// TestPrintConfigAlone (issue 27 item 19): `tau2-sampler --print-config` prints the defaults and
// lists the model as still to set (exit 0).
func TestPrintConfigAlone(t *testing.T) {
	cfg := DefaultConfig()
	clitest.PrintConfigAlone(t, &cfg, "model (a checkpoint directory) is required")
}
