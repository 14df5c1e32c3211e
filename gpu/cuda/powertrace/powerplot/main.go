// Command powerplot draws and summarizes the clock and power samples gpu/cuda/device-check.sh
// writes while it benchmarks (clocks-*.csv):
//
//	go run ./gpu/cuda/powertrace/powerplot -o step.svg -title "H100, 1.7B training step" clocks-bench.csv
//
// It prints the same summary line as device-check.sh and, with -o, draws the SM clock and the
// power draw over time (.svg or .png).
package main

import (
	"flag"
	"fmt"
	"os"

	"tau2rl/gpu/cuda/powertrace"
)

func main() {
	out := flag.String("o", "", "draw the trace into this .svg or .png file")
	title := flag.String("title", "", "the figure's title (default: the input file's name)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: powerplot [-o FILE.svg|.png] [-title TEXT] clocks.csv")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, "powerplot:", err)
		os.Exit(1)
	}
}

func run(in, out, title string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	tr, err := powertrace.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if tr.Skipped > 0 {
		fmt.Fprintf(os.Stderr, "powerplot: %s: skipped %d lines that are not samples (first: line %d)\n", in, tr.Skipped, tr.SkippedLines[0])
	}
	if s, ok := powertrace.Summarize(tr.Samples); ok {
		fmt.Printf("%s: %s\n", in, s)
	} else {
		fmt.Printf("%s: no busy samples (%d read)\n", in, len(tr.Samples))
	}
	if out == "" {
		return nil
	}
	if title == "" {
		title = in
	}
	return powertrace.Draw(out, title, tr.Samples)
}
