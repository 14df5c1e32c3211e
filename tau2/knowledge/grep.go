package knowledge

import (
	"regexp"
	"sort"

	"tau2rl/tau2/pyjson"
)

// Grep is upstream's GrepRetriever: the query is a regular expression
// (compiled case-insensitively unless CaseSensitive); every document whose
// content matches gets the number of non-overlapping matches as its score;
// results are sorted by score, ties in document order, and cut to TopK.
//
// Python's re and Go's RE2 accept mostly the same syntax. Where they
// differ this port follows upstream's own fallback: a pattern Go cannot
// compile (look-arounds, back-references, possessive forms) is searched
// as a literal string, which is what upstream does for patterns Python
// cannot compile. Known differences are listed in docs/TAU2.md §11.
type Grep struct {
	KB            *KB
	TopK          int
	CaseSensitive bool
}

// Search runs one grep query. An all-whitespace query returns nothing.
func (g *Grep) Search(query string) []Hit {
	if pyjson.Strip(query) == "" {
		return nil
	}
	re := compilePy(query, g.CaseSensitive)
	var hits []Hit
	for _, d := range g.KB.Docs {
		n := len(re.FindAllStringIndex(d.Content, -1))
		if n > 0 {
			hits = append(hits, Hit{ID: d.ID, Score: float64(n)})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].Score > hits[b].Score })
	if len(hits) > g.TopK {
		hits = hits[:max(g.TopK, 0)]
	}
	return hits
}

// compilePy compiles a Python-style pattern, falling back to the literal
// text (re.escape) when it does not compile.
func compilePy(pattern string, caseSensitive bool) *regexp.Regexp {
	prefix := "(?i)"
	if caseSensitive {
		prefix = ""
	}
	if re, err := regexp.Compile(prefix + pattern); err == nil {
		return re
	}
	if re, err := regexp.Compile(prefix + regexp.QuoteMeta(pattern)); err == nil {
		return re
	}
	// Not even the literal compiles: the pattern is not valid UTF-8 (a lone
	// surrogate from a JSON \ud800 escape). Python searches for that
	// character, which valid UTF-8 documents cannot contain.
	return matchNothing
}

var matchNothing = regexp.MustCompile(`[^\x00-\x{10FFFF}]`)
