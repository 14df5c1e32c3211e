package banking_knowledge

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/knowledge"
	"tau2rl/tau2/tau2test"
)

// TestOpenAIEmbeddingsConfig runs the openai_embeddings(_grep)
// configurations against an OpenAI-compatible embeddings server on
// loopback (hashed bag-of-words vectors): the 698 documents are embedded
// once, cached on disk, and KB_search ranks by cosine similarity.
func TestOpenAIEmbeddingsConfig(t *testing.T) {
	dir := tau2test.DataDir(t)
	var texts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/embeddings" || req.Model != "bow-256" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		texts.Add(int64(len(req.Input)))
		var data []map[string]any
		for i, in := range req.Input {
			v := make([]float64, 256)
			for _, w := range knowledge.Tokenize(in) {
				h := fnv.New32a()
				h.Write([]byte(w))
				v[h.Sum32()%256]++
			}
			data = append(data, map[string]any{"index": i, "embedding": v})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer srv.Close()
	t.Setenv("TAU2_EMBEDDINGS_CACHE", t.TempDir())
	opts := env.Options{DataDir: dir, Retrieval: "openai_embeddings_grep", EmbeddingsURL: srv.URL + "/v1", EmbeddingsModel: "bow-256"}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toolNames(e), " "); got != "KB_search grep "+baseNames {
		t.Errorf("tools: %s", got)
	}
	if n := texts.Load(); n != 698 {
		t.Errorf("indexing embedded %d texts, want 698", n)
	}
	out, isErr := e.Call(env.Assistant, "KB_search", `{"query": "debit card PIN reset forgotten"}`)
	if isErr || strings.Count(out, "\n   Score: ") != 10 || !timingRE.MatchString(out) {
		t.Errorf("KB_search: %q", out[:min(400, len(out))])
	}
	if n := texts.Load(); n != 699 {
		t.Errorf("%d texts after one query, want 699", n)
	}
	// the same configuration reuses the process's index
	if _, err := New(opts); err != nil {
		t.Fatal(err)
	}
	if n := texts.Load(); n != 699 {
		t.Errorf("second environment embedded again: %d", n)
	}
	opts.EmbeddingsURL = ""
	if _, err := New(opts); err == nil || !strings.Contains(err.Error(), "embeddings_url") {
		t.Errorf("missing URL: %v", err)
	}
}
