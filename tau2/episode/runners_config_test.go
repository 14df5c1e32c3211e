package episode

import (
	"strings"
	"testing"

	"tau2rl/lib/inference/llm"
	"tau2rl/tau2/tau2test"
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

// TestNewRunnersRefusesUnknownRetrieval: a retrieval_config banking_knowledge's environment refuses
// stops the producer at start-up, naming the key, instead of failing every episode as an
// infrastructure error.
func TestNewRunnersRefusesUnknownRetrieval(t *testing.T) {
	dir := tau2test.DataDir(t)
	c := DefaultRunnerConfig()
	c.DataDir = dir
	c.Econfig.UserLLMBaseURL = "http://user-llm:8000/v1"
	c.Econfig.Domain = "banking_knowledge"
	c.Econfig.RetrievalConfig = "bm26"
	_, err := NewRunners(c, func() int64 { return 0 }, nil)
	if err == nil || !strings.Contains(err.Error(), `econfig.retrieval_config "bm26"`) {
		t.Fatalf("NewRunners with retrieval_config bm26: %v", err)
	}
	// Accepted: a configuration banking implements, none (its default), and any value for a
	// domain without retrieval (it ignores the key).
	for _, ok := range []struct{ domain, retrieval string }{{"banking_knowledge", "bm25"}, {"banking_knowledge", ""}, {"airline", "bm26"}} {
		if err := CheckRetrieval(dir, ok.domain, ok.retrieval); err != nil {
			t.Errorf("%s with %q: %v", ok.domain, ok.retrieval, err)
		}
	}
}
