package localrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/tau2/data"
)

// TestNewRunDir: runs started within one second get their own directories.
func TestNewRunDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "runs")
	now := time.Date(2026, 11, 27, 17, 30, 5, 0, time.UTC)
	want := []string{"20261127-173005", "20261127-173005-2", "20261127-173005-3"}
	for _, w := range want {
		dir, err := NewRunDir(parent, now)
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsAbs(dir) || filepath.Base(dir) != w {
			t.Fatalf("run directory %q, want an absolute path ending in %s", dir, w)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("run directory %s not created: %v", dir, err)
		}
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRunDir(blocker, now); err == nil {
		t.Fatal("a parent that is a file: no error")
	}
}

func TestLastLineWith(t *testing.T) {
	text := "    a waiting for groups 1\n    b\n    c waiting for groups 2\n    d"
	for _, c := range []struct{ substr, want string }{
		{"waiting for groups", "c waiting for groups 2"},
		{"b", "b"},
		{"absent", ""},
	} {
		if got := lastLineWith(text, c.substr); got != c.want {
			t.Errorf("lastLineWith(%q) = %q, want %q", c.substr, got, c.want)
		}
	}
}

// TestCheckDomain: an unknown domain is a usage error naming the domains the data has.
func TestCheckDomain(t *testing.T) {
	dir, err := data.Dir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"airline", "retail", "telecom", "telecom-workflow", "mock", "banking_knowledge"} {
		if err := CheckDomain(dir, d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	err = CheckDomain(dir, "nope")
	if err == nil || !strings.Contains(err.Error(), `domain "nope"`) || !strings.Contains(err.Error(), "airline") {
		t.Fatalf("unknown domain: %v", err)
	}
}

// TestCheckRetrieval: banking_knowledge's retrieval configurations pass, an unknown one is
// refused naming the implemented ones (before any process starts), and "" is the default.
func TestCheckRetrieval(t *testing.T) {
	dir, err := data.Dir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"", "bm25", "grep_only", "no_knowledge", "golden_retrieval"} {
		if err := CheckRetrieval(dir, "banking_knowledge", r); err != nil {
			t.Errorf("%q: %v", r, err)
		}
	}
	err = CheckRetrieval(dir, "banking_knowledge", "bm26")
	if err == nil || !strings.Contains(err.Error(), `retrieval_config "bm26"`) || !strings.Contains(err.Error(), "bm25") {
		t.Fatalf("unknown retrieval config: %v", err)
	}
}

// TestStallWatch: the trainer's "waiting for groups" line is passed on once per stall, only after
// stallHint without a step, with the log read at most once per stallHint; a step starts over.
func TestStallWatch(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	log := "x\nlevel=INFO msg=\"waiting for groups\" ready_groups=0\n"
	for _, c := range []struct {
		name  string
		steps []float64 // one observation every 30 s
		logAt int       // the first observation whose log has the line (-1: never)
		say   []int     // observations that pass the line on
		reads int       // log reads
	}{
		{"stalled from the start", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, []int{4}, 1},
		{"steps keep coming", []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, nil, 0},
		{"a step, then a stall", []float64{0, 0, 0, 1, 1, 1, 1, 1, 1, 1}, 0, []int{7}, 1},
		{"nothing logged yet at the first look", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 6, []int{8}, 2},
		{"a new stall after a step says again", []float64{0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, 0, []int{4, 9}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newStallWatch(t0)
			reads := 0
			var said []int
			for i, s := range c.steps {
				now := t0.Add(time.Duration(i) * 30 * time.Second)
				why, d := w.observe(now, s, func() string {
					reads++
					if c.logAt >= 0 && i >= c.logAt {
						return log
					}
					return "x\n"
				})
				if why != "" {
					said = append(said, i)
					if !strings.Contains(why, "waiting for groups") || d < stallHint {
						t.Errorf("observation %d: %q after %s", i, why, d)
					}
				}
			}
			if fmt.Sprint(said) != fmt.Sprint(c.say) || reads != c.reads {
				t.Errorf("said at %v with %d log reads, want %v with %d", said, reads, c.say, c.reads)
			}
		})
	}
}
