package assets

import (
	"fmt"
	"io"
	"time"
)

// bar is a one-line progress bar ("\r"-updated at most every 200 ms).
type bar struct {
	w     io.Writer
	label string
	total int64
	n     int64
	last  time.Time
	start time.Time
}

func newBar(w io.Writer, label string, total int64) *bar {
	b := &bar{w: w, label: label, total: total, start: time.Now()}
	b.draw()
	return b
}

func (b *bar) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	if time.Since(b.last) > 200*time.Millisecond {
		b.draw()
	}
	return len(p), nil
}

func (b *bar) draw() {
	b.last = time.Now()
	const width = 30
	mib := float64(b.n) / (1 << 20)
	if b.total > 0 {
		frac := min(float64(b.n)/float64(b.total), 1)
		fill := int(frac * width)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < fill {
				bar[i] = '='
			}
		}
		fmt.Fprintf(b.w, "\rdownloading %s [%s] %5.1f/%.1f MiB %3.0f%%", b.label, bar, mib, float64(b.total)/(1<<20), frac*100)
		return
	}
	fmt.Fprintf(b.w, "\rdownloading %s %5.1f MiB", b.label, mib)
}

func (b *bar) done() {
	b.draw()
	fmt.Fprintf(b.w, " (%s)\n", time.Since(b.start).Round(100*time.Millisecond))
}
