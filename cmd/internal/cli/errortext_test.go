package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// TestMainArgsNamesTheCommandOnce runs MainArgs in a child process (it exits) and reads what it
// prints: a sub-command whose error begins with its own name ("grade: …", as tau2/bench and
// consumers/figures word theirs) is printed "tau2-eval grade: open …", not
// "tau2-eval grade: grade: open …" (issue 27 item 18's doubled prefixes); other errors and
// single-word programs print the error unchanged.
func TestMainArgsNamesTheCommandOnce(t *testing.T) {
	if name := os.Getenv("TAU2RL_CLI_CHILD_NAME"); name != "" {
		MainArgs(App{Name: name, MetricsAddr: "off"}, nil, &struct{}{}, func(context.Context, *Runtime) error {
			return errors.New(os.Getenv("TAU2RL_CLI_CHILD_ERR"))
		})
		return
	}
	for _, c := range []struct{ name, err, want string }{
		{"tau2-eval grade", "grade: open x.json: no such file", "tau2-eval grade: open x.json: no such file\n"},
		{"tau2-eval plot", "plot: dataset: stat d: no such file", "tau2-eval plot: dataset: stat d: no such file\n"},
		{"tau2-eval grade", "graded 0 of 3", "tau2-eval grade: graded 0 of 3\n"},
		{"tau2-eval grade", "report: x", "tau2-eval grade: report: x\n"},
		{"tau2-archiver", "archiver: dataset locked", "tau2-archiver: archiver: dataset locked\n"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainArgsNamesTheCommandOnce$")
		cmd.Env = append(os.Environ(), "TAU2RL_CLI_CHILD_NAME="+c.name, "TAU2RL_CLI_CHILD_ERR="+c.err)
		out, err := cmd.Output() // stdout: the test binary's own lines; stderr is the program's
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("%s: %v (stdout %q), want exit status 1", c.name, err, out)
		}
		if got := string(exit.Stderr); got != c.want {
			t.Errorf("%s with %q printed %q, want %q", c.name, c.err, got, c.want)
		}
	}
}
