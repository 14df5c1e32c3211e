// Package knowledge is τ²-bench v1's knowledge-base retrieval in Go
// (upstream src/tau2/knowledge and the pipeline helpers of
// src/tau2/domains/banking_knowledge/retrieval.py): the document store, a
// BM25Okapi index equal to rank_bm25 0.2.2's, and the regex ("grep")
// retriever. The banking_knowledge domain builds its KB_search and grep
// tools on it.
package knowledge

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Document is one knowledge-base document (upstream data_model.Document).
type Document struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Content string `json:"content"`
}

// KB is the loaded knowledge base: documents in load order and an id index.
//
// Upstream loads documents/*.json in Path.glob order, which is the file
// system's directory order and so differs between machines; every order-
// dependent output (full_kb prompt, BM25 and grep ties) inherits it. This
// port loads the files sorted by name (byte order), which makes those
// outputs deterministic; docs/TAU2.md §11 records the choice.
type KB struct {
	Docs []Document
	byID map[string]int
}

// Load reads every *.json file of dir as a Document. A later file with an
// id already seen replaces the earlier one in place, as upstream's dict
// assignment keeps the first insertion position.
func Load(dir string) (*KB, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("knowledge: list %s: %w", dir, err)
	}
	sort.Strings(paths)
	var docs []Document
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("knowledge: %w", err)
		}
		var d Document
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("knowledge: document %s: %w", p, err)
		}
		if d.ID == "" {
			return nil, fmt.Errorf("knowledge: document %s has no id", p)
		}
		docs = append(docs, d)
	}
	return New(docs), nil
}

// New builds a KB from documents in order (duplicate ids keep the first
// position and the last value).
func New(docs []Document) *KB {
	kb := &KB{byID: make(map[string]int, len(docs))}
	for _, d := range docs {
		if i, ok := kb.byID[d.ID]; ok {
			kb.Docs[i] = d
			continue
		}
		kb.byID[d.ID] = len(kb.Docs)
		kb.Docs = append(kb.Docs, d)
	}
	return kb
}

// Get returns the document with the given id.
func (kb *KB) Get(id string) (Document, bool) {
	i, ok := kb.byID[id]
	if !ok {
		return Document{}, false
	}
	return kb.Docs[i], true
}

// Len is the number of documents.
func (kb *KB) Len() int { return len(kb.Docs) }

// FullMarkdown is upstream's format_full_knowledge_base: every document as
// "## title\n\ncontent", joined by "\n\n---\n\n".
func (kb *KB) FullMarkdown() string {
	parts := make([]string, len(kb.Docs))
	for i, d := range kb.Docs {
		parts[i] = "## " + d.Title + "\n\n" + d.Content
	}
	return strings.Join(parts, "\n\n---\n\n")
}

// Hit is one retrieval result: a document id and its score.
type Hit struct {
	ID    string
	Score float64
}
