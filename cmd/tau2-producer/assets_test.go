package main

import (
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestAssetsFromShared (issue 27 item 14): the producer finds the τ² data and the tokenizer in
// ../shared as every binary does.
func TestAssetsFromShared(t *testing.T) {
	cfg := DefaultConfig()
	clitest.AssetsFromShared(t, &cfg, []string{"econfig.user_llm_base_url=http://127.0.0.1:1/v1"},
		[]string{"data_dir"}, []string{"policy.tokenizer"})
}

// TestPrintConfigAlone (issue 27 item 19): `tau2-producer --print-config` prints the defaults
// and lists the user simulator's URL as still to set (exit 0).
func TestPrintConfigAlone(t *testing.T) {
	cfg := DefaultConfig()
	clitest.PrintConfigAlone(t, &cfg, "user_llm_base_url: required unless solo_mode")
}
