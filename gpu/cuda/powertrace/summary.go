package powertrace

import (
	"fmt"
	"sort"
)

// Summary describes a trace's busy samples: those drawing more than a third of the power limit,
// so the idle stretches before, between and after benchmarks do not dilute the figures.
type Summary struct {
	Busy        int     // busy samples
	Read        int     // all samples
	ClockMedian float64 // MHz
	ClockP10    float64 // MHz, the 10th percentile
	PowerMedian float64 // W
	Limit       float64 // W, the first busy sample's limit
	Capped      float64 // share of busy samples with ReasonSWPowerCap set
	HeatSlowed  float64 // share of busy samples with a thermal or hardware-slowdown reason
	MaxTemp     float64 // °C
}

// Summarize computes the Summary; ok is false when no sample is busy.
func Summarize(samples []Sample) (s Summary, ok bool) {
	s.Read = len(samples)
	var clocks, power []float64
	var capped, heat int
	for _, x := range samples {
		if x.Power <= x.Limit/3 {
			continue
		}
		if s.Busy == 0 {
			s.Limit = x.Limit
		}
		s.Busy++
		clocks = append(clocks, x.SMClock)
		power = append(power, x.Power)
		if x.Reasons&ReasonSWPowerCap != 0 {
			capped++
		}
		if x.Reasons&reasonsHeat != 0 {
			heat++
		}
		s.MaxTemp = max(s.MaxTemp, x.Temp)
	}
	if s.Busy == 0 {
		return s, false
	}
	sort.Float64s(clocks)
	sort.Float64s(power)
	s.ClockMedian, s.PowerMedian = median(clocks), median(power)
	s.ClockP10 = clocks[len(clocks)/10]
	s.Capped, s.HeatSlowed = float64(capped)/float64(s.Busy), float64(heat)/float64(s.Busy)
	return s, true
}

// median of sorted values (the mean of the middle two for an even count, as Python's
// statistics.median, which device-check.sh's summary uses).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// String is device-check.sh's summary line.
func (s Summary) String() string {
	return fmt.Sprintf("%d busy samples, SM clock median %.0f MHz (p10 %.0f), power median %.0f W of %.0f, "+
		"power-capped %.0f%%, heat-slowed %.0f%%, max %.0f C", s.Busy, s.ClockMedian, s.ClockP10, s.PowerMedian,
		s.Limit, 100*s.Capped, 100*s.HeatSlowed, s.MaxTemp)
}
