package powertrace

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) Trace {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestParse(t *testing.T) {
	good := "2026/11/27 22:51:59.921, 1650, 203.28, 700.00, 44, 0x0000000000000004"
	for _, tc := range []struct {
		name      string
		in        string
		samples   int
		skipped   int
		wantError string
	}{
		{"one sample", good + "\n", 1, 0, ""},
		{"blank lines ignored", "\n" + good + "\n\n" + good + "\n", 2, 0, ""},
		{"N/A power skipped", good + "\n2026/11/27 22:51:59.971, 1650, [N/A], 700.00, 44, 0x4\n", 1, 1, ""},
		{"cut last line skipped", good + "\n2026/11/27 22:52:00.021, 16", 1, 1, ""},
		{"reasons without 0x", good + "\n2026/11/27 22:51:59.971, 1650, 203.28, 700.00, 44, 4\n", 1, 1, ""},
		{"negative clock", good + "\n2026/11/27 22:51:59.971, -5, 203.28, 700.00, 44, 0x4\n", 1, 1, ""},
		{"a header line", "timestamp, clocks.sm [MHz], power.draw [W], power.limit [W], temperature.gpu, clocks_event_reasons.active\n" + good, 1, 1, ""},
		{"empty", "", 0, 0, "no samples"},
		{"nothing parses", "hello\nworld\n", 0, 2, "none of 2 lines is a sample"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Parse(strings.NewReader(tc.in))
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Samples) != tc.samples || tr.Skipped != tc.skipped {
				t.Fatalf("%d samples, %d skipped; want %d, %d", len(tr.Samples), tr.Skipped, tc.samples, tc.skipped)
			}
		})
	}
	tr, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Samples[0]
	if s.SMClock != 1650 || s.Power != 203.28 || s.Limit != 700 || s.Temp != 44 || s.Reasons != ReasonSWPowerCap ||
		s.T.Format(timestampLayout) != "2026/11/27 22:51:59.921" {
		t.Fatalf("parsed %+v", s)
	}
}

// TestSummaryMatchesDeviceCheck: the summary of a real trace (an H100 training-step benchmark)
// is the line device-check.sh's own summary (Python, on the GPU machine) printed for the same
// file, testdata/h100-step.summary.
func TestSummaryMatchesDeviceCheck(t *testing.T) {
	tr := readTestdata(t, "h100-step.csv")
	want, err := os.ReadFile(filepath.Join("testdata", "h100-step.summary"))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := Summarize(tr.Samples)
	if !ok {
		t.Fatal("no busy samples")
	}
	if got := s.String(); got != strings.TrimSpace(string(want)) {
		t.Fatalf("summary\n got %s\nwant %s", got, want)
	}
}

// TestDeviceCheckSummaryMatchesGolden runs device-check.sh's own summary (the Python between its
// <<'PY' and PY lines) over the same trace: the golden line TestSummaryMatchesDeviceCheck holds
// the Go summary to is what that script prints, so the two cannot drift apart unnoticed.
func TestDeviceCheckSummaryMatchesGolden(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to run device-check.sh's summary")
	}
	script, err := os.ReadFile(filepath.Join("..", "device-check.sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(script), "<<'PY'\n")
	if ok {
		body, _, ok = strings.Cut(body, "\nPY\n")
	}
	if !ok {
		t.Fatal("device-check.sh has no <<'PY' … PY summary")
	}
	cmd := exec.Command(py, "-", filepath.Join("testdata", "h100-step.csv"), "step")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("device-check.sh's summary: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "h100-step.summary"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "clocks step: "+strings.TrimSpace(string(want)) {
		t.Fatalf("device-check.sh prints\n%s\nthe golden line is\n%s", got, want)
	}
}

func TestSummarize(t *testing.T) {
	mk := func(clock, power float64, reasons uint64) Sample {
		return Sample{SMClock: clock, Power: power, Limit: 600, Temp: clock / 100, Reasons: reasons}
	}
	samples := []Sample{
		mk(1980, 100, ReasonIdle), // idle: not busy (≤ 600/3)
		mk(1500, 590, ReasonSWPowerCap),
		mk(1600, 600, ReasonSWPowerCap),
		mk(1700, 580, ReasonSWPowerCap|ReasonHWThermal),
		mk(1900, 300, 0),
	}
	s, ok := Summarize(samples)
	if !ok {
		t.Fatal("no busy samples")
	}
	want := Summary{Busy: 4, Read: 5, ClockMedian: 1650, ClockP10: 1500, PowerMedian: 585, Limit: 600,
		Capped: 0.75, HeatSlowed: 0.25, MaxTemp: 19}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if _, ok := Summarize(samples[:1]); ok {
		t.Fatal("an idle trace has busy samples")
	}
}

// FuzzParse: any input parses or fails with an error, never a panic, and every sample it keeps
// has finite, non-negative readings.
func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "h100-step.csv"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add("2026/11/27 22:51:59.921, 1650, [N/A], 700.00, 44, 0x4\n")
	f.Add("2026/11/27 22:51:59.921, 1e400, 1, 1, 1, 0xffffffffffffffffff\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, s := range tr.Samples {
			for _, v := range []float64{s.SMClock, s.Power, s.Limit, s.Temp} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("kept a sample with reading %v: %+v", v, s)
				}
			}
		}
		Summarize(tr.Samples)
	})
}

func TestDraw(t *testing.T) {
	tr := readTestdata(t, "h100-step.csv")
	dir := t.TempDir()
	for _, name := range []string{"trace.svg", "trace.png"} {
		path := filepath.Join(dir, name)
		if err := Draw(path, "H100, 1.7B training step", tr.Samples); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(name) {
		case ".svg":
			if !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "SM clock") {
				t.Fatalf("%s is not the SVG figure (%d bytes)", name, len(b))
			}
		case ".png":
			if len(b) < 8 || string(b[1:4]) != "PNG" {
				t.Fatalf("%s is not a PNG (%d bytes)", name, len(b))
			}
		}
	}
	if err := Draw(filepath.Join(dir, "trace.pdf"), "", tr.Samples); err == nil {
		t.Fatal("drew a .pdf")
	}
	if err := Draw(filepath.Join(dir, "empty.svg"), "", nil); err == nil {
		t.Fatal("drew no samples")
	}
}
