// Package hforacle runs the Hugging Face reference implementations (npm
// tokenizers@0.23.2, HF's Rust tokenizer; @huggingface/jinja for the chat
// template) through the node script in lib/inference/tokenizer/testdata/oracle,
// and Python's Jinja2 configured as transformers configures it through
// template_oracle.py, so that tests can compare the Go tokenizer and chat
// template with them.
//
// It is test support: it finds the script next to its own source file and
// needs `npm ci` to have been run in that directory.
package hforacle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// InstallHint is the command that installs the oracle's npm packages.
const InstallHint = "cd lib/inference/tokenizer/testdata/oracle && npm ci"

// Dir is the oracle's directory (holding package.json and oracle.mjs).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "oracle")
}

// Available reports why the oracle cannot run (node missing, packages not
// installed), or nil when it can.
func Available() error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("hforacle: node not on PATH: %w", err)
	}
	for _, p := range []string{"tokenizers/package.json", "@huggingface/jinja/package.json"} {
		if _, err := os.Stat(filepath.Join(Dir(), "node_modules", p)); err != nil {
			return fmt.Errorf("hforacle: npm packages not installed (run %q): %w", InstallHint, err)
		}
	}
	return nil
}

// Run executes `node oracle.mjs MODE RESOURCE CASES` with cases written as
// JSON to a temporary file and decodes the script's JSON output into out.
// MODE is tokenize, decode or template; RESOURCE the tokenizer.json (or, for
// template, tokenizer_config.json) path.
func Run(ctx context.Context, mode, resource string, cases, out any) error {
	f, err := os.CreateTemp("", "hforacle-*.json")
	if err != nil {
		return fmt.Errorf("hforacle: %w", err)
	}
	defer os.Remove(f.Name())
	if err := json.NewEncoder(f).Encode(cases); err != nil {
		f.Close()
		return fmt.Errorf("hforacle: write cases: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("hforacle: %w", err)
	}
	cmd := exec.CommandContext(ctx, "node", filepath.Join(Dir(), "oracle.mjs"), mode, resource, f.Name())
	cmd.Dir = Dir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hforacle: node oracle.mjs %s: %w: %s", mode, err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("hforacle: decode %s output: %w", mode, err)
	}
	return nil
}

// PythonAvailable reports why the Python template oracle cannot run
// (python3 or its jinja2 package missing), or nil when it can.
func PythonAvailable() error {
	py, err := exec.LookPath("python3")
	if err != nil {
		return fmt.Errorf("hforacle: python3 not on PATH: %w", err)
	}
	if out, err := exec.Command(py, "-c", "import jinja2").CombinedOutput(); err != nil {
		return fmt.Errorf("hforacle: python3 cannot import jinja2 (pip install jinja2): %w: %s", err, out)
	}
	return nil
}

// RunPythonTemplate renders cases (the input of `oracle.mjs template`) with
// template_oracle.py and decodes its output into out.
func RunPythonTemplate(ctx context.Context, tokenizerConfig string, cases, out any) error {
	f, err := os.CreateTemp("", "hforacle-*.json")
	if err != nil {
		return fmt.Errorf("hforacle: %w", err)
	}
	defer os.Remove(f.Name())
	if err := json.NewEncoder(f).Encode(cases); err != nil {
		f.Close()
		return fmt.Errorf("hforacle: write cases: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("hforacle: %w", err)
	}
	cmd := exec.CommandContext(ctx, "python3", filepath.Join(Dir(), "template_oracle.py"), tokenizerConfig, f.Name())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hforacle: python3 template_oracle.py: %w: %s", err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("hforacle: decode template_oracle.py output: %w", err)
	}
	return nil
}
