package steplog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAppendRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	for i := int64(1); i <= 3; i++ {
		if err := Append(dir, Record{Kind: "grpo", Step: i, Version: i, Time: time.Unix(i, 0).UTC(), Metrics: map[string]float64{"reward": float64(i) / 4}}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := Read(dir)
	if err != nil || len(recs) != 3 || recs[2].Metrics["reward"] != 0.75 || recs[0].Kind != "grpo" {
		t.Fatalf("%+v %v", recs, err)
	}
}

func TestTornAndBadLines(t *testing.T) {
	cases := []struct {
		name, text string
		n          int
		err        string
	}{
		{"torn last line ignored", `{"kind":"sft","step":1}` + "\n" + `{"kind":"sft","st`, 1, ""},
		{"bad middle line", `{"kind":"sft","step":1}` + "\n" + `nope` + "\n" + `{"step":3}` + "\n", 0, "line 2"},
		{"empty", "", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			recs, err := Read(p)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(recs) != c.n {
				t.Fatalf("%d records, err %v", len(recs), err)
			}
		})
	}
}
