package main

import (
	"strings"
	"testing"
)

// TestRoute (issue 27 item 21): tau2-eval with no sub-command, an unknown one or a flag in its
// place prints the usage and exits 2; help exits 0; a known command is handed its arguments.
func TestRoute(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		cmd  bool
		want string
	}{
		{nil, 2, false, "no command given"},
		{[]string{"--print-config"}, 2, false, "--print-config needs a command first"},
		{[]string{"-x"}, 2, false, "-x needs a command first"},
		{[]string{"gradee"}, 2, false, `unknown command "gradee"`},
		{[]string{"help"}, 0, false, "commands:"},
		{[]string{"--help"}, 0, false, "commands:"},
		{[]string{"grade", "r.json"}, 0, true, ""},
	} {
		var b strings.Builder
		cmd, code := route(c.args, &b)
		if code != c.code || (cmd != nil) != c.cmd || !strings.Contains(b.String(), c.want) {
			t.Errorf("%q: exit %d, command %v, output %q; want exit %d, command %v, output with %q", c.args, code, cmd != nil, b.String(), c.code, c.cmd, c.want)
		}
		if !c.cmd && !strings.Contains(b.String(), "usage: tau2-eval COMMAND") {
			t.Errorf("%q: no usage printed: %q", c.args, b.String())
		}
	}
}
