package knowledge

import (
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

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

	once  sync.Once
	lower []string // content with A-Z lowered (other bytes unchanged)
	ascii []bool   // the fast path applies: no character that folds to ASCII
}

// literalASCII reports a pattern with no regex syntax and only ASCII: its
// case-insensitive matches in a document are the occurrences of its
// lowercase form in the document with A-Z lowered (non-overlapping, left to
// right, like re.findall), found much faster than by RE2's (?i) — unless
// the document holds one of the two non-ASCII letters that case-fold to
// ASCII (U+212A KELVIN SIGN ~ k, U+017F LONG S ~ s); those take the regexp.
func literalASCII(p string) bool {
	if regexp.QuoteMeta(p) != p {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (g *Grep) prepare() {
	g.once.Do(func() {
		g.lower = make([]string, len(g.KB.Docs))
		g.ascii = make([]bool, len(g.KB.Docs))
		for i, d := range g.KB.Docs {
			if !strings.ContainsRune(d.Content, '\u212a') && !strings.ContainsRune(d.Content, '\u017f') {
				g.ascii[i] = true
				g.lower[i] = lowerASCII(d.Content)
			}
		}
	})
}

// lowerASCII lowers A-Z and leaves every other byte as it is.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Search runs one grep query. An all-whitespace query returns nothing.
func (g *Grep) Search(query string) []Hit {
	if pyjson.Strip(query) == "" {
		return nil
	}
	re := compilePy(query, g.CaseSensitive)
	fast := !g.CaseSensitive && literalASCII(query)
	lq := lowerASCII(query)
	if fast {
		g.prepare()
	}
	var hits []Hit
	for i, d := range g.KB.Docs {
		var n int
		if fast && g.ascii[i] {
			n = strings.Count(g.lower[i], lq)
		} else {
			n = len(re.FindAllStringIndex(d.Content, -1))
		}
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
