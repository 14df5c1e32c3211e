package main

import (
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { c := DefaultConfig(); return &c })
}
