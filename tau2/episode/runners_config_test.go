package episode

import (
	"strings"
	"testing"

	"tau2rl/lib/inference/llm"
)

// TestLoadTokenizerSaysWhatToSet: without a tokenizer the error names both ways to give one.
func TestLoadTokenizerSaysWhatToSet(t *testing.T) {
	t.Chdir(t.TempDir()) // no ../shared/qwen3-tokenizer above it
	for _, env := range []string{"", t.TempDir()} {
		t.Setenv("QWEN3_TOKENIZER_DIR", env)
		_, err := LoadTokenizer("")
		if err == nil {
			t.Fatal("no tokenizer anywhere, yet one loaded")
		}
		for _, want := range []string{"QWEN3_TOKENIZER_DIR", "policy.tokenizer"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("QWEN3_TOKENIZER_DIR=%q: error %q does not name %s", env, err, want)
			}
		}
	}
}

// TestValidateVLLMNeedsModel: vLLM's completions API needs the served model's name; the runner
// configuration (tau2-producer, tau2-eval run) requires policy.model instead of guessing from /v1/models (which lists LoRA adapters too).
func TestValidateVLLMNeedsModel(t *testing.T) {
	c := DefaultRunnerConfig()
	c.Econfig.UserLLMBaseURL = "http://user-llm:8000/v1"
	c.Policy.Backend = llm.BackendVLLM
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "policy.model") {
		t.Fatalf("vllm without policy.model: %v", err)
	}
	c.Policy.Model = "Qwen3-8B"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
