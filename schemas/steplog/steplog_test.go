package steplog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// steps returns the kinds and steps of dir's records, in file order.
func steps(t *testing.T, dir string) []string {
	t.Helper()
	recs, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s%d", r.Kind, r.Step)
	}
	return out
}

// TestAppendAfterResume (issue 27 item 21): a trainer that crashed after logging steps 4 and 5
// but before checkpointing them resumes from step 3 and logs 4 and 5 again; the file held them
// twice. An append of a step at or below the last one logged drops the records of that kind from
// that step on (they belong to the run that was rolled back), so each step appears once, as the
// later run logged it.
func TestAppendAfterResume(t *testing.T) {
	rec := func(kind string, step int64, loss float64) Record {
		return Record{Kind: kind, Step: step, Version: step, Time: time.Unix(step, 0).UTC(), Metrics: map[string]float64{"loss": loss}}
	}
	for _, c := range []struct {
		name    string
		initial []Record
		appends []Record
		want    []string
		loss4   float64 // the loss of grpo step 4 after the appends (0: no step 4)
	}{
		{"plain appends", []Record{rec("grpo", 1, 1), rec("grpo", 2, 1)}, []Record{rec("grpo", 3, 1), rec("grpo", 4, 2)},
			[]string{"grpo1", "grpo2", "grpo3", "grpo4"}, 2},
		{"resume after a crash", []Record{rec("grpo", 1, 1), rec("grpo", 2, 1), rec("grpo", 3, 1), rec("grpo", 4, 1), rec("grpo", 5, 1)},
			[]Record{rec("grpo", 4, 2), rec("grpo", 5, 2), rec("grpo", 6, 2)},
			[]string{"grpo1", "grpo2", "grpo3", "grpo4", "grpo5", "grpo6"}, 2},
		{"resume from scratch", []Record{rec("grpo", 1, 1), rec("grpo", 2, 1)}, []Record{rec("grpo", 1, 2)},
			[]string{"grpo1"}, 0},
		{"same step again", []Record{rec("grpo", 3, 1), rec("grpo", 4, 1)}, []Record{rec("grpo", 4, 2)},
			[]string{"grpo3", "grpo4"}, 2},
		{"other kinds kept", []Record{rec("sft", 1, 1), rec("sft", 2, 1), rec("grpo", 1, 1), rec("grpo", 2, 1)}, []Record{rec("grpo", 2, 2)},
			[]string{"sft1", "sft2", "grpo1", "grpo2"}, 0},
		{"first of a new kind", []Record{rec("sft", 1, 1), rec("sft", 2, 1)}, []Record{rec("grpo", 1, 2)},
			[]string{"sft1", "sft2", "grpo1"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, r := range c.initial {
				if err := Append(dir, r); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range c.appends {
				if err := Append(dir, r); err != nil {
					t.Fatal(err)
				}
			}
			if got := steps(t, dir); !slices.Equal(got, c.want) {
				t.Fatalf("records %v, want %v", got, c.want)
			}
			if c.loss4 != 0 {
				recs, _ := Read(dir)
				for _, r := range recs {
					if r.Kind == "grpo" && r.Step == 4 && r.Metrics["loss"] != c.loss4 {
						t.Fatalf("step 4 holds loss %v, want the later run's %v", r.Metrics["loss"], c.loss4)
					}
				}
			}
		})
	}
}

// TestAppendAfterTornLine: a process that died mid-write leaves a torn last line; the next append
// used to be glued onto it, making a malformed line in the middle of the file that Read refuses
// for good. The torn tail is dropped first.
func TestAppendAfterTornLine(t *testing.T) {
	dir := t.TempDir()
	text := `{"kind":"grpo","step":1}` + "\n" + `{"kind":"grpo","step":2}` + "\n" + `{"kind":"grpo","st`
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range []int64{2, 3} {
		if err := Append(dir, Record{Kind: "grpo", Step: s}); err != nil {
			t.Fatal(err)
		}
	}
	if got := steps(t, dir); !slices.Equal(got, []string{"grpo1", "grpo2", "grpo3"}) {
		t.Fatalf("records %v", got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if strings.Count(string(b), "\n") != 3 || strings.Contains(string(b), `"st{`) {
		t.Fatalf("file:\n%s", b)
	}
}

// TestAppendLongFile: the check reads the file's tail, not the whole file, yet a rollback far
// behind the tail still rewrites it correctly.
func TestAppendLongFile(t *testing.T) {
	dir := t.TempDir()
	big := map[string]float64{}
	for i := range 50 {
		big[fmt.Sprintf("metric_%02d_with_a_long_name", i)] = float64(i) / 7
	}
	for s := int64(1); s <= 300; s++ {
		if err := Append(dir, Record{Kind: "grpo", Step: s, Metrics: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := Append(dir, Record{Kind: "grpo", Step: 11}); err != nil {
		t.Fatal(err)
	}
	got := steps(t, dir)
	if len(got) != 11 || got[10] != "grpo11" || got[9] != "grpo10" {
		t.Fatalf("%d records, last %v", len(got), got[len(got)-1])
	}
}
