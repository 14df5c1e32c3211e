package archiver

import (
	"sort"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := func() error { c := DefaultConfig(); return c.Validate() }(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cases := map[string]struct {
		mut  func(*Config)
		want string
	}{
		"no dir":          {func(c *Config) { c.DatasetDir = "" }, "dataset_dir"},
		"no group":        {func(c *Config) { c.Group = "" }, "group"},
		"tiny roll":       {func(c *Config) { c.Roll.MaxBytes = 10 }, "roll.max_bytes"},
		"zero age":        {func(c *Config) { c.Roll.MaxAge = 0 }, "roll.max_age"},
		"zero open files": {func(c *Config) { c.MaxOpenFiles = 0 }, "max_open_files"},
		"negative window": {func(c *Config) { c.DedupWindow = -1 }, "dedup_window"},
		"zero workers":    {func(c *Config) { c.DecodeWorkers = 0 }, "decode_workers"},
		"lz4 level":       {func(c *Config) { c.Parquet.ZstdLevel = "lz4" }, "zstd_level"},
	}
	for name, tc := range cases {
		c := DefaultConfig()
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %s", name, err, tc.want)
		}
	}
}

func TestIDSetWindow(t *testing.T) {
	s := newIDSet(3)
	for _, id := range []string{"a", "b", "c"} {
		s.add(keyOf(id))
	}
	s.pin(keyOf("p"))
	s.add(keyOf("d")) // evicts a
	for id, want := range map[string]bool{"a": false, "b": true, "c": true, "d": true, "p": true, "x": false} {
		if got := s.has(keyOf(id)); got != want {
			t.Errorf("has(%s) = %v, want %v", id, got, want)
		}
	}
	for i := 0; i < 10; i++ {
		s.add(keyOf(strings.Repeat("z", i+1)))
	}
	if !s.has(keyOf("p")) {
		t.Fatal("pinned id evicted")
	}
	if s.len() != 4 {
		t.Fatalf("len = %d, want window 3 + 1 pinned", s.len())
	}
	none := newIDSet(0)
	none.add(keyOf("a"))
	if none.has(keyOf("a")) {
		t.Fatal("a zero window remembers ids")
	}
}

// TestFileNamesSortInOpenOrder: start-up takes the newest files by name, so
// names must sort as the files were opened, also across runs within one
// second (a run's random id must not decide; it did with whole seconds).
func TestFileNamesSortInOpenOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 17, 4, 50, 100e6, time.UTC)
	opened := []string{
		dataFileName(t0, "ffffffff", 1),
		dataFileName(t0, "ffffffff", 2),
		dataFileName(t0.Add(time.Millisecond), "00000000", 1), // the next run
		dataFileName(t0.Add(time.Second), "00000000", 2),
	}
	if !sort.StringsAreSorted(opened) {
		t.Fatalf("names do not sort in open order: %q", opened)
	}
	for _, n := range opened {
		if !IsDataFile(n) || isTempFile(n) {
			t.Fatalf("%q: not recognised as a data file", n)
		}
	}
}

func TestFileNames(t *testing.T) {
	for name, want := range map[string][2]bool{
		"part-20261121T101010.123Z-abcd-000001.parquet":      {true, false},
		".part-20261121T101010.123Z-abcd-000001.parquet.tmp": {false, true},
		"part-x.parquet.tmp":                                 {false, false},
		"notes.parquet":                                      {false, false},
		".archiver.lock":                                     {false, false},
	} {
		if IsDataFile(name) != want[0] || isTempFile(name) != want[1] {
			t.Errorf("%s: data %v temp %v, want %v", name, IsDataFile(name), isTempFile(name), want)
		}
	}
}
