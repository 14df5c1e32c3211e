package knowledge

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// bowVector is the loopback server's embedding: hashed bag of words, 16 dims.
func bowVector(text string) []float64 {
	v := make([]float64, 16)
	for _, w := range Tokenize(text) {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%16]++
	}
	return v
}

type embedServer struct {
	*httptest.Server
	requests, texts atomic.Int64
	lastAuth        atomic.Value
}

// newEmbedServer is an OpenAI-compatible /v1/embeddings server on loopback
// that answers with the data entries in reverse order (clients must use
// "index").
func newEmbedServer(t *testing.T) *embedServer {
	s := &embedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.Error(w, `{"error": "not found"}`, http.StatusNotFound)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
			http.Error(w, `{"error": "bad request"}`, http.StatusBadRequest)
			return
		}
		if req.Model == "broken" {
			http.Error(w, `{"error": {"message": "model overloaded"}}`, http.StatusServiceUnavailable)
			return
		}
		s.requests.Add(1)
		s.texts.Add(int64(len(req.Input)))
		s.lastAuth.Store(r.Header.Get("Authorization"))
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		var data []item
		for i := len(req.Input) - 1; i >= 0; i-- {
			data = append(data, item{"embedding", i, bowVector(req.Input[i])})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
	}))
	t.Cleanup(s.Close)
	return s
}

func testKB() *KB {
	return New([]Document{
		{ID: "a", Content: "credit card dispute process"},
		{ID: "b", Content: "debit card pin reset"},
		{ID: "c", Content: "savings account interest"},
		{ID: "d", Content: "debit card pin reset"}, // same text as b: a tie
		{ID: "e", Content: ""},
	})
}

func TestDenseSearchAndCache(t *testing.T) {
	srv := newEmbedServer(t)
	cache := &EmbeddingCache{Dir: t.TempDir()}
	emb := &Embedder{BaseURL: srv.URL + "/v1", Model: "m1", APIKey: "k", BatchSize: 2}
	d := &Dense{KB: testKB(), Embedder: emb, Cache: cache, TopK: 3}
	if err := d.Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	if srv.requests.Load() != 3 || srv.texts.Load() != 5 { // 5 texts in batches of 2
		t.Fatalf("%d requests for %d texts", srv.requests.Load(), srv.texts.Load())
	}
	if srv.lastAuth.Load() != "Bearer k" {
		t.Errorf("auth header %v", srv.lastAuth.Load())
	}
	hits, err := d.Search(context.Background(), "reset my debit card PIN")
	if err != nil {
		t.Fatal(err)
	}
	// b and d tie (same vector): upstream's argsort[::-1] puts d first
	if len(hits) != 3 || hits[0].ID != "d" || hits[1].ID != "b" || hits[0].Score != hits[1].Score {
		t.Fatalf("hits %v", hits)
	}
	// straightforward cosine
	q := bowVector("reset my debit card PIN")
	want := cosine(q, bowVector("debit card pin reset"))
	if math.Abs(hits[0].Score-want) > 1e-12 {
		t.Errorf("score %v, cosine %v", hits[0].Score, want)
	}

	// a second index reads everything from the cache
	before := srv.texts.Load()
	d2 := &Dense{KB: testKB(), Embedder: emb, Cache: cache, TopK: 3}
	if err := d2.Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	if srv.texts.Load() != before {
		t.Errorf("cached index embedded %d texts", srv.texts.Load()-before)
	}
	// a changed document is embedded again (content hash), the rest not
	kb := testKB()
	kb.Docs[2].Content = "savings account interest rates"
	d3 := &Dense{KB: kb, Embedder: emb, Cache: cache, TopK: 3}
	if err := d3.Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := srv.texts.Load() - before; n != 1 {
		t.Errorf("changed content: %d texts embedded, want 1", n)
	}
	// another model does not see m1's vectors
	emb2 := &Embedder{BaseURL: srv.URL + "/v1", Model: "m2"}
	if _, ok := cache.Get(emb2.Model, "credit card dispute process"); ok {
		t.Error("cache shared across models")
	}
	// a corrupt cache file is a miss
	p := cache.path("m1", "credit card dispute process")
	if err := os.WriteFile(p, []byte("xyz"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := cache.Get("m1", "credit card dispute process"); ok {
		t.Error("corrupt cache file used")
	}
}

func cosine(a, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += a[i] * b[i]
		aa += a[i] * a[i]
		bb += b[i] * b[i]
	}
	return ab / (math.Sqrt(aa) * math.Sqrt(bb))
}

func TestEmbedderErrors(t *testing.T) {
	srv := newEmbedServer(t)
	for _, c := range []struct {
		name string
		e    *Embedder
		want string
	}{
		{"http error", &Embedder{BaseURL: srv.URL + "/v1", Model: "broken"}, "HTTP 503"},
		{"wrong path", &Embedder{BaseURL: srv.URL + "/nope", Model: "m"}, "HTTP 404"},
		{"unreachable", &Embedder{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, "connect"},
	} {
		_, err := c.e.Embed(context.Background(), []string{"x"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [2]}]}`))
	}))
	defer bad.Close()
	if _, err := (&Embedder{BaseURL: bad.URL, Model: "m"}).Embed(context.Background(), []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "repeated index") {
		t.Errorf("repeated index: %v", err)
	}
	if _, err := (&Embedder{BaseURL: bad.URL, Model: "m"}).Embed(context.Background(), []string{"a"}); err == nil || !strings.Contains(err.Error(), "2 vectors for 1 texts") {
		t.Errorf("count: %v", err)
	}
}
