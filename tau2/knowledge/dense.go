package knowledge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Embedder calls an OpenAI-compatible embeddings endpoint
// (POST {BaseURL}/embeddings {"model", "input": [...]}), as upstream's
// OpenAIEmbedder does through the openai client.
type Embedder struct {
	// BaseURL is the API base, e.g. https://api.openai.com/v1 or
	// http://host:8000/v1 (vLLM, TEI, llama.cpp, …).
	BaseURL string
	// Model is sent as "model" (upstream: text-embedding-3-large).
	Model string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// BatchSize is the number of texts per request (default 64).
	BatchSize int
	// Client defaults to an http.Client with a 60 s timeout.
	Client *http.Client
}

type embeddingsResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// Embed returns one vector per text, in order.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float64, error) {
	if len(texts) == 0 {
		return nil, errors.New("knowledge: embed: no text to embed")
	}
	bs := e.BatchSize
	if bs <= 0 {
		bs = 64
	}
	out := make([][]float64, 0, len(texts))
	for i := 0; i < len(texts); i += bs {
		batch := texts[i:min(i+bs, len(texts))]
		vecs, err := e.embedBatch(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *Embedder) embedBatch(ctx context.Context, texts []string) ([][]float64, error) {
	body, err := json.Marshal(map[string]any{"model": e.Model, "input": texts})
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(e.BaseURL, "/") + "/embeddings"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("knowledge: embeddings request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	c := e.Client
	if c == nil {
		c = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("knowledge: embeddings %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("knowledge: embeddings %s: reading the response: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("knowledge: embeddings %s: HTTP %d: %.300s (check the URL, the model name %q and the API key)", url, resp.StatusCode, raw, e.Model)
	}
	var r embeddingsResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("knowledge: embeddings %s: not an embeddings response: %w", url, err)
	}
	if len(r.Data) != len(texts) {
		return nil, fmt.Errorf("knowledge: embeddings %s: %d vectors for %d texts", url, len(r.Data), len(texts))
	}
	out := make([][]float64, len(texts))
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("knowledge: embeddings %s: bad or repeated index %d", url, d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, fmt.Errorf("knowledge: embeddings %s: empty vector at index %d", url, d.Index)
		}
		out[d.Index] = d.Embedding
	}
	dim := len(out[0])
	for i, v := range out {
		if len(v) != dim {
			return nil, fmt.Errorf("knowledge: embeddings %s: vector %d has %d dimensions, vector 0 has %d", url, i, len(v), dim)
		}
	}
	return out, nil
}

// EmbeddingCache stores one vector per (model, text) on disk, keyed by
// sha256(model + NUL + text): a document whose content changes gets a new
// key, so stale vectors are never used. Files are little-endian float64.
type EmbeddingCache struct{ Dir string }

func (c *EmbeddingCache) path(model, text string) string {
	h := sha256.Sum256([]byte(model + "\x00" + text))
	k := hex.EncodeToString(h[:])
	return filepath.Join(c.Dir, k[:2], k+".f64")
}

// Get returns the cached vector, if any (a corrupt file counts as a miss).
func (c *EmbeddingCache) Get(model, text string) ([]float64, bool) {
	b, err := os.ReadFile(c.path(model, text))
	if err != nil || len(b) == 0 || len(b)%8 != 0 {
		return nil, false
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, true
}

// Put stores a vector (atomically: temp file, then rename).
func (c *EmbeddingCache) Put(model, text string, v []float64) error {
	p := c.path(model, text)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("knowledge: embedding cache: %w", err)
	}
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("knowledge: embedding cache: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("knowledge: embedding cache: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("knowledge: embedding cache: %w", err)
	}
	return os.Rename(f.Name(), p)
}

// Dense is upstream's embedding pipeline (embedding_indexer,
// embedding_encoder, cosine retriever): documents' content embedded once
// (through the cache), the query embedded per search, cosine similarity,
// top k. Ties: upstream takes np.argsort(scores)[::-1], i.e. equal scores
// in descending document order when the sort is stable; the port does that.
type Dense struct {
	KB       *KB
	Embedder *Embedder
	Cache    *EmbeddingCache // nil: no cache
	TopK     int
	docs     [][]float64 // normalized
}

// Index embeds every document not in the cache.
func (d *Dense) Index(ctx context.Context) error {
	d.docs = make([][]float64, d.KB.Len())
	var missing []int
	for i, doc := range d.KB.Docs {
		if d.Cache != nil {
			if v, ok := d.Cache.Get(d.Embedder.Model, doc.Content); ok {
				d.docs[i] = v
				continue
			}
		}
		missing = append(missing, i)
	}
	if len(missing) > 0 {
		texts := make([]string, len(missing))
		for j, i := range missing {
			texts[j] = d.KB.Docs[i].Content
		}
		vecs, err := d.Embedder.Embed(ctx, texts)
		if err != nil {
			return err
		}
		for j, i := range missing {
			d.docs[i] = vecs[j]
			if d.Cache != nil {
				if err := d.Cache.Put(d.Embedder.Model, texts[j], vecs[j]); err != nil {
					return err
				}
			}
		}
	}
	dim := len(d.docs[0])
	for i, v := range d.docs {
		if len(v) != dim {
			return fmt.Errorf("knowledge: document %s: %d dimensions, others %d (a cache from another model? remove it)", d.KB.Docs[i].ID, len(v), dim)
		}
		d.docs[i] = normalized(v)
	}
	return nil
}

func normalized(v []float64) []float64 {
	n := 0.0
	for _, x := range v {
		n += x * x
	}
	n = math.Sqrt(n)
	if n == 0 {
		n = 1
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / n
	}
	return out
}

// Search embeds the query and returns the TopK documents by cosine similarity.
func (d *Dense) Search(ctx context.Context, query string) ([]Hit, error) {
	if d.docs == nil {
		return nil, errors.New("knowledge: dense search before Index")
	}
	vecs, err := d.Embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, err
	}
	q := vecs[0]
	if len(q) != len(d.docs[0]) {
		return nil, fmt.Errorf("knowledge: query vector has %d dimensions, documents %d", len(q), len(d.docs[0]))
	}
	scores := make([]float64, len(d.docs))
	qn := 0.0
	for _, x := range q {
		qn += x * x
	}
	if qn != 0 {
		q = normalized(q)
		for i, dv := range d.docs {
			s := 0.0
			for j := range q {
				s += dv[j] * q[j]
			}
			scores[i] = s
		}
	}
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = len(scores) - 1 - i // descending index order for ties
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	k := min(d.TopK, len(idx))
	hits := make([]Hit, k)
	for i := 0; i < k; i++ {
		hits[i] = Hit{ID: d.KB.Docs[idx[i]].ID, Score: scores[idx[i]]}
	}
	return hits, nil
}
