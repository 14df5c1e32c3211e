package scripts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLearnPrebuiltRunSeq: start-seq's queue (the run-seq mode it detaches) runs the lines of a
// run list one after another, never two at once (the issue-29 layouts each need the whole
// machine), skipping comments and blank lines, passing each line's arguments (shell-quoted) and
// its own run directory, going on after a run that fails, logging each start and exit in
// seq.log, and clearing seq.running (what `wait` follows) when the list is done.
func TestLearnPrebuiltRunSeq(t *testing.T) {
	T := t.TempDir()
	if err := os.MkdirAll(filepath.Join(T, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in tau2-run: records its start and end, fails for the run named "fails".
	standIn := `#!/bin/bash
order=` + filepath.Join(T, "order") + `
name=$(basename "${3#dir=}")
echo "start $name $*" >>$order
[[ -f $order.busy ]] && echo OVERLAP >>$order
touch $order.busy; sleep 0.2; rm -f $order.busy
echo "end $name" >>$order
[[ $name != fails ]]
`
	if err := os.WriteFile(filepath.Join(T, "bin", "tau2-run"), []byte(standIn), 0o755); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(T, "list.runs")
	if err := os.WriteFile(list, []byte("# a comment\nfirst gpus=4 samplers=3 'sampler_args=[kv.blocks=64]'\n\nfails gpus=1\nlast offpolicyness=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("T2_DIR", T)
	out, code := run(t, os.Getenv("PATH"), "learn-prebuilt.sh", "run-seq", list)
	if code != 0 {
		t.Fatalf("run-seq exited %d:\n%s", code, out)
	}
	order, _ := os.ReadFile(filepath.Join(T, "order"))
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(order)), "\n") {
		got = append(got, strings.Join(strings.Fields(l)[:2], " "))
	}
	if strings.Join(got, ", ") != "start first, end first, start fails, end fails, start last, end last" {
		t.Errorf("runs in order %q, want one after another:\n%s", got, order)
	}
	if want := "experiment bin=" + T + "/bin dir=" + T + "/runs/first gpus=4 samplers=3 sampler_args=[kv.blocks=64]"; !strings.Contains(string(order), want) {
		t.Errorf("first run's arguments: want %q in\n%s", want, order)
	}
	log, _ := os.ReadFile(filepath.Join(T, "seq.log"))
	for _, want := range []string{"start first: gpus=4", "end fails: exit 1", "end last: exit 0"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("seq.log lacks %q:\n%s", want, log)
		}
	}
	if _, err := os.Stat(filepath.Join(T, "seq.running")); !os.IsNotExist(err) {
		t.Errorf("seq.running left behind (%v): wait would follow a finished queue", err)
	}
	if _, err := os.Stat(filepath.Join(T, "runs", "last", "exp.log")); err != nil {
		t.Error(err)
	}
}
