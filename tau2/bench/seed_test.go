package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"
)

// seedRecorder is a reverse proxy in front of the policy's server that keeps the "seed" of
// every chat completion request passing through.
type seedRecorder struct {
	mu    sync.Mutex
	seeds map[int64]int // seed → requests
	plain int           // requests without a seed
}

func newSeedRecorder(t *testing.T, target string) (*seedRecorder, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &seedRecorder{seeds: map[int64]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
		var body struct {
			Seed *int64 `json:"seed"`
		}
		if json.Unmarshal(b, &body) == nil && req.Method == http.MethodPost {
			r.mu.Lock()
			if body.Seed != nil {
				r.seeds[*body.Seed]++
			} else {
				r.plain++
			}
			r.mu.Unlock()
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// trialSeeds runs a small chat-mode evaluation with this seed and returns each simulation's
// (trial → seed) from the results file, and what the policy's server saw.
func trialSeeds(t *testing.T, url string, seed int64, send bool) (map[int64]int64, *seedRecorder) {
	t.Helper()
	rec, policyURL := newSeedRecorder(t, url)
	cfg := chatRunConfig(t, url, policyURL)
	cfg.Seed, cfg.Policy.SendSeed = seed, send
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Run(ctx, &cfg, io.Discard, deps()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cfg.Output)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Info struct {
			Seed int64 `json:"seed"`
		} `json:"info"`
		Simulations []struct {
			Trial int64 `json:"trial"`
			Seed  int64 `json:"seed"`
		} `json:"simulations"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Info.Seed != seed || len(res.Simulations) == 0 {
		t.Fatalf("results: info.seed %d (want %d), %d simulations", res.Info.Seed, seed, len(res.Simulations))
	}
	out := map[int64]int64{}
	for _, s := range res.Simulations {
		if prev, ok := out[s.Trial]; ok && prev != s.Seed {
			t.Fatalf("trial %d has seeds %d and %d", s.Trial, prev, s.Seed)
		}
		out[s.Trial] = s.Seed
	}
	return out, rec
}

// TestSeedSetsTheTrials: tau2-eval run's seed draws the trials' seeds (τ²'s way), so one seed
// gives the same trial seeds and another seed others; with policy.send_seed every policy request
// carries its trial's seed, and without it none does (the sampler then draws from a seed of its
// own).
func TestSeedSetsTheTrials(t *testing.T) {
	url, _ := scriptedURL(t)
	a, rec := trialSeeds(t, url, 300, true)
	b, _ := trialSeeds(t, url, 300, true)
	c, plain := trialSeeds(t, url, 301, false)
	if len(a) != 2 || a[0] == a[1] {
		t.Fatalf("trial seeds %v: want 2 distinct", a)
	}
	if a[0] != b[0] || a[1] != b[1] {
		t.Errorf("seed 300 drew %v, then %v", a, b)
	}
	if a[0] == c[0] && a[1] == c[1] {
		t.Errorf("seeds 300 and 301 drew the same trial seeds %v", a)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.plain != 0 || len(rec.seeds) != 2 || rec.seeds[a[0]] == 0 || rec.seeds[a[1]] == 0 {
		t.Errorf("send_seed: policy requests by seed %v (%d without one), want only the trial seeds %v", rec.seeds, rec.plain, a)
	}
	plain.mu.Lock()
	defer plain.mu.Unlock()
	if len(plain.seeds) != 0 || plain.plain == 0 {
		t.Errorf("without send_seed: policy requests by seed %v, %d without", plain.seeds, plain.plain)
	}
}
