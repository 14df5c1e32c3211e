package main

import (
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestAssetsFromShared (issue 27 item 14): run by hand without $TAU2_DATA_DIR, the trainer finds
// the τ² task splits in ../shared as every binary does (it used to require the variable).
func TestAssetsFromShared(t *testing.T) {
	cfg := DefaultConfig()
	clitest.AssetsFromShared(t, &cfg, []string{"model.config=m.json"}, []string{"data_dir"}, nil)
}
