// Package powertrace reads the GPU clock and power samples that gpu/cuda/device-check.sh records
// while its bench stage runs, summarizes them and draws them.
//
// Why it exists: the Qwen3-1.7B training step is power-bound on H100 and H200. The card holds its
// 700 W limit and the driver lowers the SM clock to stay under it (docs/PERFORMANCE.md), so a
// kernel timed alone on a cool card and the same kernel inside the step run at different clocks.
// The samples say which regime a benchmark ran in; the picture shows it at a glance.
//
// The input is nvidia-smi's CSV, one sample per line, as device-check.sh asks for it:
//
//	nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active \
//	    --format=csv,noheader,nounits -lms 50
//
// for example "2026/11/27 22:51:42.401, 1620, 698.31, 700.00, 57, 0x0000000000000004". Lines that
// do not parse (a field nvidia-smi reports as "[N/A]", the last line cut when the sampler is
// stopped) are skipped and counted, as device-check.sh's own summary does.
package powertrace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Clock-event reason bits (nvidia-smi's clocks_event_reasons.active, NVML's
// nvmlClocksEventReason*): why the SM clock is below the maximum.
const (
	ReasonIdle       = 0x1  // nothing running
	ReasonSWPowerCap = 0x4  // the driver holds the clock down to stay under the power limit
	ReasonHWSlowdown = 0x8  // hardware slowdown (heat or power brake)
	ReasonSWThermal  = 0x20 // the driver holds the clock down for temperature
	ReasonHWThermal  = 0x40 // hardware thermal slowdown

	reasonsHeat = ReasonHWSlowdown | ReasonSWThermal | ReasonHWThermal
)

const (
	timestampLayout    = "2006/01/02 15:04:05.000"
	fieldsPerSample    = 6
	maxSkippedReported = 8
)

// Sample is one nvidia-smi reading.
type Sample struct {
	T       time.Time
	SMClock float64 // MHz
	Power   float64 // W, the board's draw (averaged by the driver over its own window)
	Limit   float64 // W, the enforced power limit
	Temp    float64 // °C
	Reasons uint64  // clock-event reason bits (Reason*)
}

// Trace is a parsed file: its samples in file order and how many lines were skipped.
type Trace struct {
	Samples []Sample
	Skipped int
	// SkippedLines are the first few skipped lines' numbers (1-based), for an error message.
	SkippedLines []int
}

// Parse reads nvidia-smi samples. It fails on a read error and when no line holds a sample.
func Parse(r io.Reader) (Trace, error) {
	var tr Trace
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		s, err := parseLine(text)
		if err != nil {
			tr.Skipped++
			if len(tr.SkippedLines) < maxSkippedReported {
				tr.SkippedLines = append(tr.SkippedLines, line)
			}
			continue
		}
		tr.Samples = append(tr.Samples, s)
	}
	if err := sc.Err(); err != nil {
		return tr, fmt.Errorf("powertrace: read line %d: %w", line+1, err)
	}
	if len(tr.Samples) == 0 {
		if tr.Skipped > 0 {
			return tr, fmt.Errorf("powertrace: none of %d lines is a sample (want %q, e.g. line %d)",
				tr.Skipped, "timestamp, clocks.sm, power.draw, power.limit, temperature.gpu, clocks_event_reasons.active", tr.SkippedLines[0])
		}
		return tr, errors.New("powertrace: no samples")
	}
	return tr, nil
}

func parseLine(text string) (Sample, error) {
	f := strings.Split(text, ",")
	if len(f) != fieldsPerSample {
		return Sample{}, fmt.Errorf("%d fields, want %d", len(f), fieldsPerSample)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	var s Sample
	var err error
	if s.T, err = time.Parse(timestampLayout, f[0]); err != nil {
		return Sample{}, err
	}
	nums := []*float64{&s.SMClock, &s.Power, &s.Limit, &s.Temp}
	for i, p := range nums {
		v, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			return Sample{}, err
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return Sample{}, fmt.Errorf("field %d: %v", i+2, v)
		}
		*p = v
	}
	hex, ok := strings.CutPrefix(strings.ToLower(f[5]), "0x")
	if !ok {
		return Sample{}, fmt.Errorf("reasons %q: want 0x…", f[5])
	}
	if s.Reasons, err = strconv.ParseUint(hex, 16, 64); err != nil {
		return Sample{}, err
	}
	return s, nil
}
