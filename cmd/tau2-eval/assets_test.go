package main

import (
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestAssetsFromShared (issue 27 item 14): every tau2-eval sub-command that reads the τ² data
// (and run, the tokenizer) finds it in ../shared as every binary does.
func TestAssetsFromShared(t *testing.T) {
	g := defaultGradeConfig()
	clitest.AssetsFromShared(t, &g, []string{"input=r.json"}, []string{"data_dir"}, nil)
	s := defaultSynthConfig()
	clitest.AssetsFromShared(t, &s, []string{"output=o.json"}, []string{"data_dir"}, nil)
	r := defaultRunConfig()
	clitest.AssetsFromShared(t, &r, []string{"econfig.user_llm_base_url=http://127.0.0.1:1/v1", "output=o.json"},
		[]string{"data_dir"}, []string{"policy.tokenizer"})
}
