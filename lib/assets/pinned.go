package assets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Pinned upstream revisions (docs/ASSETS.md says which pins were verified against the network).
const (
	// Tau2Commit is the tau2-bench commit whose data/ the τ² port reproduces (branch main,
	// 2026-08-18).
	Tau2Commit = "a2c024725189473d2d7cea3a5cfdbcc67478e41f"
	// Tau2V021Ref is the v0.2.1 release (commit 0ed2fd8), the pre-1.0 task files.
	Tau2V021Ref = "v0.2.1"
	// Qwen3Repo and Qwen3Revision name the Hugging Face repository and commit of the tokenizer.
	// The revision could not be checked from the build machine (no network): the download is
	// verified by the content digest below, whatever the file's formatting.
	Qwen3Repo     = "Qwen/Qwen3-0.6B"
	Qwen3Revision = "c1899de289a04d12100db370d81485cdf75e47ca"
	// Qwen3TokenizerDigest is TokenizerDigest of Qwen3's tokenizer.json (vocabulary, merges and
	// added tokens), computed from the copy the tests use.
	Qwen3TokenizerDigest = "58e6eb3c7b429d78a6503d5573072b0e5da51dd7a2a6a435e767c48b64e591b2"
)

// Tau2Data is the τ²-bench data directory: data/tau2/** at Tau2Commit plus the v0.2.1 task files
// under _versions/v0.2.1-0ed2fd8/. derived/ (reference outputs of τ²'s Python code, used only by
// tests) is not part of the download.
var Tau2Data = Asset{
	Name: "tau2-data", EnvVar: "TAU2_DATA_DIR", Marker: "tau2/domains", Revision: Tau2Commit[:7],
	Sources: []Source{
		{URL: "https://github.com/sierra-research/tau2-bench/archive/" + Tau2Commit + ".tar.gz", Archive: true, Strip: "data/", Files: tau2HeadFiles},
		{URL: "https://github.com/sierra-research/tau2-bench/archive/refs/tags/" + Tau2V021Ref + ".tar.gz", Archive: true, Strip: "data/",
			Dest: "_versions/v0.2.1-0ed2fd8", Files: tau2V021Files},
	},
}

// Qwen3Tokenizer is the directory holding Qwen3's tokenizer.json.
var Qwen3Tokenizer = Asset{
	Name: "qwen3-tokenizer", EnvVar: "QWEN3_TOKENIZER_DIR", Marker: "tokenizer.json", Revision: Qwen3Revision[:7],
	Sources: []Source{{
		URL:   "https://huggingface.co/" + Qwen3Repo + "/resolve/" + Qwen3Revision + "/tokenizer.json",
		Files: []File{{Path: "tokenizer.json", SHA256: Qwen3TokenizerDigest}},
	}},
	Verify: func(f File, path string) error {
		got, err := TokenizerDigest(path)
		if err != nil {
			return err
		}
		if got != f.SHA256 {
			return fmt.Errorf("content digest %s, pinned %s: %w", got, f.SHA256, ErrChecksum)
		}
		return nil
	},
}

// Tau2DataDir resolves the τ² data directory (dir: an explicit directory, "" for the order).
func Tau2DataDir(dir string) (string, error) {
	return Resolve(context.Background(), Tau2Data, Options{Dir: dir})
}

// Qwen3TokenizerDir resolves the directory of Qwen3's tokenizer.json.
func Qwen3TokenizerDir() (string, error) {
	return Resolve(context.Background(), Qwen3Tokenizer, Options{})
}

// TokenizerDigest is the sha256 of a tokenizer.json's content — the vocabulary by id, the merges
// (either "a b" strings or ["a","b"] pairs, as tokenizers of different versions write them) and
// the added tokens — so that the same tokenizer in any JSON formatting (Hugging Face's indented
// file, a minified copy) has one digest.
func TokenizerDigest(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var t struct {
		Model struct {
			Vocab  map[string]int    `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", fmt.Errorf("tokenizer.json: %w", err)
	}
	if len(t.Model.Vocab) == 0 {
		return "", fmt.Errorf("tokenizer.json: no model.vocab")
	}
	h := sha256.New()
	toks := make([]string, 0, len(t.Model.Vocab))
	for tok := range t.Model.Vocab {
		toks = append(toks, tok)
	}
	sort.Slice(toks, func(i, j int) bool { return t.Model.Vocab[toks[i]] < t.Model.Vocab[toks[j]] })
	for _, tok := range toks {
		fmt.Fprintf(h, "v\t%d\t%q\n", t.Model.Vocab[tok], tok)
	}
	for i, m := range t.Model.Merges {
		var pair []string
		if err := json.Unmarshal(m, &pair); err != nil {
			var s string
			if err := json.Unmarshal(m, &s); err != nil {
				return "", fmt.Errorf("tokenizer.json: merge %d: %w", i, err)
			}
			a, c, ok := strings.Cut(s, " ")
			if !ok {
				return "", fmt.Errorf("tokenizer.json: merge %d %q", i, s)
			}
			pair = []string{a, c}
		}
		if len(pair) != 2 {
			return "", fmt.Errorf("tokenizer.json: merge %d has %d parts", i, len(pair))
		}
		fmt.Fprintf(h, "m\t%q\t%q\n", pair[0], pair[1])
	}
	for _, a := range t.Added {
		fmt.Fprintf(h, "a\t%d\t%q\t%v\n", a.ID, a.Content, a.Special)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
