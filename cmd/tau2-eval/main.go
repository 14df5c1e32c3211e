// Command tau2-eval evaluates τ² agents. Sub-commands, one file each:
//
//	tau2-eval grade RESULTS.json -o REGRADED.json [key=value …]
//	    re-grade every simulation of a τ² results file with the Go evaluator
//	tau2-eval synth -o RESULTS.json domain=airline [key=value …]
//	    write a results file of gold-action transcripts (tests, benchmarks)
//
// Further sub-commands (run, report) register themselves in commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"tau2rl/cmd/internal/cli"
	// Every τ² domain registers itself with the environment registry.
	_ "tau2rl/tau2/domains"
)

// command is one sub-command: main hands it the arguments after its name.
type command struct {
	summary string
	main    func(args []string)
}

// commands maps sub-command names to their entry points; each sub-command's
// file adds itself from an init function.
var commands = map[string]command{}

func main() {
	c, code := route(os.Args[1:], os.Stderr)
	if c == nil {
		os.Exit(code)
	}
	c.main(os.Args[2:])
}

// route picks the sub-command named by args[0]. With none, or an unknown one, or a flag in its
// place (tau2-eval --print-config), it prints the usage to w and returns exit status 2 (a usage
// error: a script that forgot the sub-command must not read as a success); help, -h and --help
// print it and return 0.
func route(args []string, w io.Writer) (*command, int) {
	if len(args) == 0 {
		fmt.Fprintln(w, "tau2-eval: no command given")
		usage(w)
		return nil, 2
	}
	switch a := args[0]; a {
	case "help", "-h", "--help", "-help":
		usage(w)
		return nil, 0
	default:
		if c, ok := commands[a]; ok {
			return &c, 0
		}
		if strings.HasPrefix(a, "-") {
			fmt.Fprintf(w, "tau2-eval: %s needs a command first (tau2-eval COMMAND %s)\n\n", a, a)
		} else {
			fmt.Fprintf(w, "tau2-eval: unknown command %q\n\n", a)
		}
		usage(w)
		return nil, 2
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tau2-eval COMMAND [arguments] [key=value …]   (tau2-eval COMMAND --help)")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
}

// subcommand runs one tau2-eval command through cli: its positional arguments become
// "<positional>=VALUE" overrides and -o FILE "output=FILE" (splitArgs), the rest are cli's
// key=value overrides and flags of cfg; no metrics endpoint (these are one-shot commands).
func subcommand(name, usage, positional string, args []string, cfg any, run func(ctx context.Context, rt *cli.Runtime) error) {
	rest, err := splitArgs(args, positional)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tau2-eval %s: %v\n", name, err)
		os.Exit(2)
	}
	cli.MainArgs(cli.App{Name: "tau2-eval " + name, Usage: usage, MetricsAddr: "off"}, rest, cfg, run)
}

// splitArgs separates positional arguments and "-o FILE" from the
// key=value/flag arguments that cli parses: positional ones become
// "<positional>=VALUE" overrides, -o/--output becomes "output=FILE".
func splitArgs(args []string, positional string) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "--output":
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs a file name", a)
			}
			i++
			out = append(out, "output="+args[i])
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--output="):
			_, v, _ := strings.Cut(a, "=")
			out = append(out, "output="+v)
		case a == "--config" || a == "-c" || a == "--metrics-addr" || a == "--log-level" || a == "--log-format":
			out = append(out, a)
			if i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		case !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && a != "help":
			if positional == "" {
				return nil, fmt.Errorf("unexpected argument %q", a)
			}
			out = append(out, positional+"="+a)
		default:
			out = append(out, a)
		}
	}
	return out, nil
}
