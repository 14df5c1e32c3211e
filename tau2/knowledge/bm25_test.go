package knowledge

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"tau2rl/tau2/tau2test"
)

func loadRealKB(t testing.TB) *KB {
	t.Helper()
	dir := tau2test.DataDir(t)
	kb, err := Load(filepath.Join(dir, "tau2", "domains", "banking_knowledge", "documents"))
	if err != nil {
		t.Fatal(err)
	}
	if kb.Len() != 698 {
		t.Fatalf("loaded %d documents, want 698", kb.Len())
	}
	return kb
}

func corpusOf(kb *KB) [][]string {
	c := make([][]string, kb.Len())
	for i, d := range kb.Docs {
		c[i] = Tokenize(d.Content)
	}
	return c
}

// naiveBM25 is the textbook BM25Okapi, written independently of BM25:
// per-document term counts, idf floored at epsilon times the mean idf.
func naiveBM25(corpus [][]string, query []string) []float64 {
	const k1, b, eps = 1.5, 0.75, 0.25
	n := float64(len(corpus))
	df := map[string]int{}
	total := 0
	for _, d := range corpus {
		total += len(d)
		seen := map[string]bool{}
		for _, w := range d {
			if !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	avgdl := float64(total) / n
	sum := 0.0
	for _, c := range df {
		sum += math.Log((n - float64(c) + 0.5) / (float64(c) + 0.5))
	}
	mean := sum / float64(len(df))
	idf := func(w string) float64 {
		c, ok := df[w]
		if !ok {
			return 0
		}
		v := math.Log((n - float64(c) + 0.5) / (float64(c) + 0.5))
		if v < 0 {
			return eps * mean
		}
		return v
	}
	out := make([]float64, len(corpus))
	for i, d := range corpus {
		for _, q := range query {
			f := 0.0
			for _, w := range d {
				if w == q {
					f++
				}
			}
			out[i] += idf(q) * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(d))/avgdl))
		}
	}
	return out
}

// TestBM25AgainstNaive compares every score of many queries (all words of
// a few documents, singly and together, plus unknown words) with the
// straightforward implementation on the real 698-document corpus: within
// 1e-9, and the same ranking wherever scores differ by more than that.
func TestBM25AgainstNaive(t *testing.T) {
	kb := loadRealKB(t)
	corpus := corpusOf(kb)
	m := NewBM25(corpus)
	var queries [][]string
	for _, i := range []int{0, 17, 350, 697} {
		queries = append(queries, corpus[i][:min(12, len(corpus[i]))])
		for _, w := range corpus[i][:min(15, len(corpus[i]))] {
			queries = append(queries, []string{w})
		}
	}
	queries = append(queries, []string{"no-such-token"}, []string{}, []string{"the", "the", "card"})
	for _, q := range queries {
		got, want := m.Scores(q), naiveBM25(corpus, q)
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Fatalf("query %q doc %d: score %v, naive %v", q, i, got[i], want[i])
			}
		}
		gi, wi := topK(got, len(got)), topK(want, len(want))
		for r := range gi {
			if gi[r] != wi[r] && math.Abs(got[gi[r]]-got[wi[r]]) > 1e-9 {
				t.Fatalf("query %q rank %d: doc %d, naive doc %d", q, r, gi[r], wi[r])
			}
		}
	}
}

// TestBM25Golden checks the top 25 of 15 queries, bit for bit, against
// testdata/bm25_oracle.py (rank_bm25 0.2.2's arithmetic and tau2's
// BM25Retriever ordering, run with python3 on the same corpus).
func TestBM25Golden(t *testing.T) {
	kb := loadRealKB(t)
	b, err := os.ReadFile(filepath.Join("testdata", "bm25_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		NDocs      int    `json:"n_docs"`
		AvgDL      string `json:"avgdl"`
		AverageIDF string `json:"average_idf"`
		Queries    []struct {
			Query   string     `json:"query"`
			Nonzero int        `json:"nonzero"`
			Top     [][]string `json:"top"`
		} `json:"queries"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	m := NewBM25(corpusOf(kb))
	hex := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if m.AvgDL != hex(g.AvgDL) || m.AverageIDF != hex(g.AverageIDF) {
		t.Fatalf("avgdl %v average_idf %v, oracle %s %s", m.AvgDL, m.AverageIDF, g.AvgDL, g.AverageIDF)
	}
	for _, q := range g.Queries {
		scores := m.Scores(Tokenize(q.Query))
		nz := 0
		for _, s := range scores {
			if s != 0 {
				nz++
			}
		}
		if nz != q.Nonzero {
			t.Errorf("%q: %d nonzero scores, oracle %d", q.Query, nz, q.Nonzero)
		}
		top := m.TopK(q.Query, len(q.Top))
		for r, want := range q.Top {
			d := kb.Docs[top[r]]
			if d.ID != want[0] || scores[top[r]] != hex(want[1]) || strconv.FormatFloat(scores[top[r]], 'f', 4, 64) != want[2] {
				t.Errorf("%q rank %d: %s %x, oracle %s %s", q.Query, r, d.ID, scores[top[r]], want[0], want[1])
			}
		}
	}
}

func TestTokenize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  A  b\tC\n", []string{"a", "b", "c"}},
		{"Card. CARD,", []string{"card.", "card,"}},
		{"x\u00a0y\u2003z\x1cw", []string{"x", "y", "z", "w"}}, // Python's str.split() whitespace
		{"İstanbul", []string{"i̇stanbul"}},                    // full lowercase mapping
	} {
		got := Tokenize(c.in)
		if len(got) != len(c.want) {
			t.Fatalf("Tokenize(%q) = %q, want %q", c.in, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("Tokenize(%q) = %q, want %q", c.in, got, c.want)
			}
		}
	}
}

func TestTopKTiesInCorpusOrder(t *testing.T) {
	m := NewBM25([][]string{{"a"}, {"b"}, {"a"}, {"c"}, {"a"}})
	got := m.TopK("a zzz", 4)
	want := []int{0, 2, 4, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("TopK = %v, want %v", got, want)
		}
	}
	if m.TopK(" \t", 3) != nil {
		t.Fatal("blank query returned results")
	}
}

// TestTopKMatchesStableSort checks the insertion path of topK against a
// stable sort on scores with many ties, NaN-free, for every k.
func TestTopKMatchesStableSort(t *testing.T) {
	scores := []float64{1, 3, 3, 0, 2, 3, 0, 1, 2, 2, 5, 0, 3}
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	for k := 0; k <= len(scores)+2; k++ {
		got := topK(scores, k)
		want := idx[:min(k, len(idx))]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("k=%d: topK %v, stable sort %v", k, got, want)
		}
	}
}

func BenchmarkBM25Query(b *testing.B) {
	kb := loadRealKB(b)
	m := NewBM25(corpusOf(kb))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.TopK("how do I dispute a credit card transaction", 10)
	}
}

func BenchmarkBM25Index(b *testing.B) {
	kb := loadRealKB(b)
	for i := 0; i < b.N; i++ {
		NewBM25(corpusOf(kb))
	}
}
