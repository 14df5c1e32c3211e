package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/trajtest"
)

// plotDataset writes a small archive: two domains, policy versions 0..3 with rising rewards,
// episodes ending over three minutes, and a 3-step trainer log.
func plotDataset(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	var all []*schemas.Trajectory
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for v := int64(0); v < 4; v++ {
		for ti, dom := range []string{"airline", "retail"} {
			o := trajtest.Default()
			o.Domain, o.Version = dom, v
			rewards := make([]float64, 4)
			for i := range rewards {
				if i < int(v)+1 {
					rewards[i] = 1
				}
			}
			g, err := trajtest.Group(o, fmt.Sprint(ti), uint64(10*v)+uint64(ti)+1, rewards)
			if err != nil {
				t.Fatal(err)
			}
			for i, tr := range g {
				tr.ID = fmt.Sprintf("%s-v%d-%d", dom, v, i)
				tr.EndedAt = start.Add(time.Duration(v)*time.Minute + time.Duration(i)*time.Second)
			}
			all = append(all, g...)
		}
	}
	if err := dataset.WriteFile(filepath.Join(root, "part-0.parquet"), all, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	ckpt := t.TempDir()
	for s := int64(1); s <= 3; s++ {
		if err := steplog.Append(ckpt, steplog.Record{Kind: "grpo", Step: s, Version: s, Time: start,
			Metrics: map[string]float64{"behav_abs_diff": 0.01 * float64(s), "behav_cap_fraction": 0.001}}); err != nil {
			t.Fatal(err)
		}
	}
	return root, ckpt
}

// TestPlot draws every figure from a dataset and step log the test writes: each PNG decodes at
// the requested size, each SVG is well-formed XML naming the figure's series.
func TestPlot(t *testing.T) {
	src, ckpt := plotDataset(t)
	out := filepath.Join(t.TempDir(), "figs")
	cfg := defaultPlotConfig()
	base := 0.3
	cfg.Dataset, cfg.Steps, cfg.Out, cfg.Baseline = src, ckpt, out, &base
	cfg.Timeline = "../../consumers/figures/testdata/gputime.jsonl"
	var stdout bytes.Buffer
	if err := runPlot(context.Background(), &cfg, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "32 trajectories, 4 policy versions, mean reward v0 0.250 → v3 1.000") {
		t.Fatalf("output %q", stdout.String())
	}
	series := map[string][]string{
		"reward":              {"mean reward", "95% confidence band", "baseline 0.30", "policy version"},
		"passk":               {"airline (1 tasks)", "retail (1 tasks)", "pass^k"},
		"tokens_per_minute":   {"generated tokens", "tokens / minute"},
		"episodes_per_minute": {"episodes", "episodes / minute"},
		"mismatch":            {"mean |behaviour − proximal|", "fraction masked by the weight cap"},
		"gputime":             {"decode", "weight_sync", "GPU utilisation (nvidia-smi)", "sampler 127.0.0.1:9001", "wall time of the GRPO stage (s)"},
	}
	for name, want := range series {
		f, err := os.Open(filepath.Join(out, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || c.Width < 400 || c.Height < 250 {
			t.Fatalf("%s.png: %+v %v", name, c, err)
		}
		b, err := os.ReadFile(filepath.Join(out, name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(b))
		var text strings.Builder
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s.svg is not XML: %v", name, err)
			}
			if cd, ok := tok.(xml.CharData); ok {
				text.Write(cd)
			}
		}
		for _, w := range want {
			if !strings.Contains(text.String(), w) {
				t.Errorf("%s.svg does not name %q", name, w)
			}
		}
	}
}

func TestPlotUsageErrors(t *testing.T) {
	src, _ := plotDataset(t)
	for _, c := range []struct {
		edit func(*plotConfig)
		want string
	}{
		{func(c *plotConfig) { c.Dataset = "" }, "dataset (an archive) or report"},
		{func(c *plotConfig) { c.Report = reportFixture }, "alternatives"},
		{func(c *plotConfig) { c.Formats = []string{"pdf"} }, "pdf"},
		{func(c *plotConfig) { c.MaxK = 0 }, "max_k"},
		{func(c *plotConfig) { c.Filter.Domains = []string{"telecom"} }, "no trajectory"},
		{func(c *plotConfig) { c.Steps = filepath.Join(t.TempDir(), "missing.jsonl") }, "missing.jsonl"},
	} {
		cfg := defaultPlotConfig()
		cfg.Dataset, cfg.Out = src, t.TempDir()
		c.edit(&cfg)
		if err := runPlot(context.Background(), &cfg, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want %q", err, c.want)
		}
	}
}

// TestPlotReport draws an experiment's report.json (consumers/figures/testdata, numbers from the first
// learning run): reward with the band of each version's count and standard deviation, the
// demonstrator as the default baseline, pass^k before and after, the mismatch.
func TestPlotReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "figs")
	cfg := defaultPlotConfig()
	cfg.Report, cfg.Out, cfg.Formats = reportFixture, out, []string{"svg"}
	var stdout bytes.Buffer
	if err := runPlot(context.Background(), &cfg, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "3 policy versions, mean reward v0 0.108 → v2 1.000") {
		t.Fatalf("output %q", stdout.String())
	}
	for name, want := range map[string][]string{
		"reward":   {"baseline 0.36", "95% confidence band"},
		"passk":    {"airline before GRPO (13 tasks)", "airline after GRPO (13 tasks)"},
		"mismatch": {"mean |behaviour − proximal|"},
	} {
		b, err := os.ReadFile(filepath.Join(out, name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s.svg does not name %q", name, w)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(out, "tokens_per_minute.svg")); err == nil {
		t.Error("tokens_per_minute drawn from a report, which has no throughput")
	}
}

func TestPlotReportErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		path, want string
	}{
		{filepath.Join(dir, "missing.json"), "missing.json"},
		{write("text.json", "not json"), "not a tau2-run experiment report"},
		{write("empty.json", `{"grpo": {}}`), "no reward per policy version"},
		{write("lengths.json", `{"grpo": {"reward_per_version": [{"version": 0, "episodes": 2, "mean_reward": 0.5, "std": 0.7}], "behav_abs_diff_per_step": [0.1], "behav_cap_fraction_per_step": []}}`), "1 mismatch values but 0"},
		{write("zero.json", `{"grpo": {"reward_per_version": [{"version": 4, "episodes": 0, "mean_reward": 0.5, "std": 0}]}}`), "version 4 has 0 episodes"},
	} {
		cfg := defaultPlotConfig()
		cfg.Report, cfg.Out = c.path, t.TempDir()
		if err := runPlot(context.Background(), &cfg, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", filepath.Base(c.path), err, c.want)
		}
	}
}

// reportFixture is the report.json of the first learning run, beside its parser.
var reportFixture = filepath.Join("..", "..", "consumers", "figures", "testdata", "report.json")
