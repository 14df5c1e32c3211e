package knowledge

import (
	"sort"
	"strings"
	"unicode/utf8"

	"tau2rl/tau2/pyjson"
)

// BM25 parameters of rank_bm25's BM25Okapi defaults, which upstream uses.
const (
	BM25K1      = 1.5
	BM25B       = 0.75
	BM25Epsilon = 0.25
)

// Tokenize is upstream's `text.lower().split()`: Python's full Unicode
// lowercase, then split on runs of Python whitespace.
func Tokenize(text string) []string {
	return strings.FieldsFunc(pyjson.Lower(text), func(r rune) bool {
		return r != utf8.RuneError && pyjson.IsSpace(r)
	})
}

// BM25 is rank_bm25 0.2.2's BM25Okapi over a tokenized corpus, computed in
// the same floating-point operation order and with a correctly rounded ln
// (see crLog), so scores equal CPython's bit for bit (TestBM25Golden):
//
//	idf(w)  = ln(N - n(w) + 0.5) - ln(n(w) + 0.5), and for the words whose
//	          idf is negative: epsilon * mean(idf over all words)
//	score   = Σ_q idf(q) * (f(q,d) * (k1+1) / (f(q,d) + k1*(1 - b + b*|d|/avgdl)))
//
// The mean is summed in first-appearance order of the words, as Python's
// dict is. A query word outside the vocabulary adds 0. Repeated query words
// count once per occurrence.
type BM25 struct {
	K1, B, Epsilon float64
	N              int
	AvgDL          float64
	AverageIDF     float64
	docLen         []float64
	idf            map[string]float64
	// postings: word -> (doc index, term frequency), doc indices ascending.
	postings map[string][]posting
}

type posting struct {
	doc  int32
	freq float64
}

// NewBM25 indexes the tokenized corpus with the default parameters.
func NewBM25(corpus [][]string) *BM25 {
	return NewBM25With(corpus, BM25K1, BM25B, BM25Epsilon)
}

// NewBM25With indexes the tokenized corpus with explicit parameters. The
// corpus must not be empty (rank_bm25 divides by its size).
func NewBM25With(corpus [][]string, k1, b, epsilon float64) *BM25 {
	m := &BM25{K1: k1, B: b, Epsilon: epsilon, N: len(corpus),
		idf: map[string]float64{}, postings: map[string][]posting{}}
	var order []string // first-appearance order of words (Python dict order of nd)
	numTokens := 0
	for i, doc := range corpus {
		m.docLen = append(m.docLen, float64(len(doc)))
		numTokens += len(doc)
		freqs := map[string]float64{}
		var docOrder []string
		for _, w := range doc {
			if _, ok := freqs[w]; !ok {
				docOrder = append(docOrder, w)
			}
			freqs[w]++
		}
		for _, w := range docOrder {
			if _, ok := m.postings[w]; !ok {
				order = append(order, w)
			}
			m.postings[w] = append(m.postings[w], posting{doc: int32(i), freq: freqs[w]})
		}
	}
	m.AvgDL = float64(numTokens) / float64(m.N)
	idfSum := 0.0
	var negative []string
	n := float64(m.N)
	logs := map[float64]float64{} // crLog is slow; there are at most N+1 distinct arguments
	log := func(x float64) float64 {
		v, ok := logs[x]
		if !ok {
			v = crLog(x)
			logs[x] = v
		}
		return v
	}
	for _, w := range order {
		nd := float64(len(m.postings[w]))
		idf := log(n-nd+0.5) - log(nd+0.5)
		m.idf[w] = idf
		idfSum += idf
		if idf < 0 {
			negative = append(negative, w)
		}
	}
	if len(order) > 0 {
		m.AverageIDF = idfSum / float64(len(order))
	}
	eps := m.Epsilon * m.AverageIDF
	for _, w := range negative {
		m.idf[w] = eps
	}
	return m
}

// IDF returns the (floored) idf of a word and whether it is in the vocabulary.
func (m *BM25) IDF(word string) (float64, bool) {
	v, ok := m.idf[word]
	return v, ok
}

// Scores is BM25Okapi.get_scores: one score per document in corpus order.
func (m *BM25) Scores(query []string) []float64 {
	scores := make([]float64, m.N)
	m.addScores(scores, query)
	return scores
}

func (m *BM25) addScores(scores []float64, query []string) {
	k1p1 := m.K1 + 1
	for _, q := range query {
		idf := m.idf[q]
		ps := m.postings[q]
		// numpy adds idf*0/(…) = 0.0 to documents without the word, which
		// leaves their score unchanged (x + 0.0 == x for every x but -0.0,
		// and scores start at +0.0); so only the postings need updating.
		for _, p := range ps {
			dl := m.docLen[p.doc]
			num := float64(p.freq * k1p1)
			norm := float64(m.K1 * float64(1-m.B+float64(m.B*dl)/m.AvgDL))
			scores[p.doc] += float64(idf * float64(num/float64(p.freq+norm)))
		}
	}
}

// TopK is upstream's BM25Retriever.retrieve: the k best documents by score,
// ties in corpus order (Python's stable sort with reverse=True), scores of
// zero included. An empty or all-whitespace query returns nothing.
func (m *BM25) TopK(query string, k int) []int {
	if strings.TrimFunc(query, pyjson.IsSpace) == "" {
		return nil
	}
	scores := m.Scores(Tokenize(query))
	return topK(scores, k)
}

// topK returns the indices of the k highest scores, ties in index order:
// the first k of Python's sorted(range(n), key=score, reverse=True), which
// is stable. Small k (the retrievers' case) is a single insertion pass.
func topK(scores []float64, k int) []int {
	k = max(0, min(k, len(scores)))
	if k > 32 {
		idx := make([]int, len(scores))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
		return idx[:k]
	}
	top := make([]int, 0, k+1)
	for i, s := range scores {
		if len(top) == k && (k == 0 || !(s > scores[top[k-1]])) {
			continue
		}
		// insert after every kept score >= s (stability)
		j := len(top)
		for j > 0 && s > scores[top[j-1]] {
			j--
		}
		top = append(top, 0)
		copy(top[j+1:], top[j:])
		top[j] = i
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}
