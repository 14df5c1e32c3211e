package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRun(t *testing.T) {
	in := filepath.Join("..", "testdata", "h100-step.csv")
	out := filepath.Join(t.TempDir(), "trace.png")
	if err := run(in, out, ""); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Fatalf("no figure: %v", err)
	}
	if err := run(filepath.Join(t.TempDir(), "missing.csv"), "", ""); err == nil {
		t.Fatal("a missing input: no error")
	}
	if err := run(in, filepath.Join(t.TempDir(), "trace.jpg"), ""); err == nil {
		t.Fatal("a .jpg output: no error")
	}
}
