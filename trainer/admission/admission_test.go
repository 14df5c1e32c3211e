package admission

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func tasks(n int) []Task {
	var out []Task
	for i := 0; i < n; i++ {
		out = append(out, Task{Domain: "airline", Split: "train", ID: string(rune('a' + i))})
	}
	return out
}

func TestCapacityFormula(t *testing.T) {
	// B = 4, max_head_offpolicyness = 2: (2+1)·4 = 12 live requests at most.
	m, err := New(DefaultConfig(), tasks(5), 8, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	reqs, err := m.Issue(0, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 12 || m.Capacity() != 0 || m.Live() != 12 {
		t.Fatalf("issued %d, capacity %d, live %d", len(reqs), m.Capacity(), m.Live())
	}
	r := reqs[0]
	if r.GroupSize != 8 || r.PolicyVersion != 0 || *r.StaleAfterVersion != 2 || r.Validate() != nil {
		t.Fatalf("request %+v", r)
	}
	// A request finishes when all 8 of its trajectories are trained or discarded.
	for i := 0; i < 7; i++ {
		if m.Finished(r.RequestID, string(rune('0'+i))) {
			t.Fatal("finished early")
		}
	}
	m.Finished(r.RequestID, "0") // repeated trajectory id does not count twice
	if m.Live() != 12 {
		t.Fatal("duplicate finished a request")
	}
	if !m.Finished(r.RequestID, "7") || m.Capacity() != 1 {
		t.Fatalf("capacity %d after one request finished", m.Capacity())
	}
	m.Finished("unknown", "x")
	// Version 3: requests issued at 0 can only give tokens 3 versions old > 2: expired as stale.
	stale, timedOut := m.Expire(3, now)
	if stale != 11 || timedOut != 0 || m.Capacity() != 12 {
		t.Fatalf("stale %d timed out %d capacity %d", stale, timedOut, m.Capacity())
	}
	reqs, _ = m.Issue(3, now)
	if _, timedOut = m.Expire(3, now.Add(DefaultConfig().RequestTimeout)); timedOut != len(reqs) {
		t.Fatalf("timed out %d of %d", timedOut, len(reqs))
	}
	m.Cancel(nil)
}

func TestMaxConcurrentCaps(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConcurrentRollouts = 5
	m, _ := New(cfg, tasks(3), 8, 16, 2)
	if m.Limit() != 5 {
		t.Fatalf("limit %d", m.Limit())
	}
	reqs, _ := m.Issue(0, time.Now())
	m.Cancel(reqs[:2])
	if m.Live() != 3 {
		t.Fatalf("live %d after cancel", m.Live())
	}
}

func TestTaskCycleDeterministic(t *testing.T) {
	order := func(m *Manager, n int) []string {
		var ids []string
		for len(ids) < n {
			reqs, _ := m.Issue(0, time.Now())
			for _, r := range reqs {
				ids = append(ids, r.TaskID)
				m.Finished(r.RequestID, "only")
			}
		}
		return ids[:n]
	}
	cfg := DefaultConfig()
	m1, _ := New(cfg, tasks(4), 1, 1, 0)
	a := order(m1, 12)
	// Every epoch is a permutation of all tasks.
	for e := 0; e < 3; e++ {
		ep := slices.Clone(a[4*e : 4*e+4])
		slices.Sort(ep)
		if !slices.Equal(ep, []string{"a", "b", "c", "d"}) {
			t.Fatalf("epoch %d is %v", e, a[4*e:4*e+4])
		}
	}
	// A restart restored from state continues the same sequence.
	m2, _ := New(cfg, tasks(4), 1, 1, 0)
	first := order(m2, 5)
	st, err := m2.State()
	if err != nil {
		t.Fatal(err)
	}
	m3, _ := New(cfg, tasks(4), 1, 1, 0)
	if err := m3.Restore(st); err != nil {
		t.Fatal(err)
	}
	rest := order(m3, 7)
	if got := append(first, rest...); !slices.Equal(got, a) {
		t.Fatalf("resumed order %v, want %v", got, a)
	}
}

func TestStateRoundTripLive(t *testing.T) {
	m, _ := New(DefaultConfig(), tasks(2), 2, 1, 1)
	reqs, _ := m.Issue(5, time.Unix(100, 0))
	m.Finished(reqs[0].RequestID, "t1")
	st, _ := m.State()
	m2, _ := New(DefaultConfig(), tasks(2), 2, 1, 1)
	if err := m2.Restore(st); err != nil {
		t.Fatal(err)
	}
	if m2.Live() != 2 || m2.Issued() != 2 {
		t.Fatalf("live %d issued %d", m2.Live(), m2.Issued())
	}
	if !m2.Finished(reqs[0].RequestID, "t2") {
		t.Fatal("restored request lost its finished trajectories")
	}
	for _, bad := range []string{`{"issued":-1}`, `{"live":[{"id":""}]}`, `nope`} {
		if err := m2.Restore([]byte(bad)); err == nil {
			t.Errorf("restored %s", bad)
		}
	}
}

func TestNewErrors(t *testing.T) {
	bad := DefaultConfig()
	bad.Sampling.TopP = 2
	cases := []struct {
		cfg   Config
		tasks []Task
		n, b  int
		off   int64
	}{
		{DefaultConfig(), nil, 8, 16, 2},
		{DefaultConfig(), tasks(1), 0, 16, 2},
		{DefaultConfig(), tasks(1), 8, 16, -1},
		{bad, tasks(1), 8, 16, 2},
	}
	for i, c := range cases {
		if _, err := New(c.cfg, c.tasks, c.n, c.b, c.off); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

func TestParseSplit(t *testing.T) {
	data := []byte(`{"train": ["0", "1", "3"], "test": ["2"], "base": []}`)
	ts, err := ParseSplit(data, "airline", "train")
	if err != nil || len(ts) != 3 || ts[2] != (Task{Domain: "airline", Split: "train", ID: "3"}) {
		t.Fatalf("%v %v", ts, err)
	}
	for _, c := range []struct{ data, domain, split, want string }{
		{`{"train": ["0"]}`, "airline", "dev", "no split"},
		{`{"base": []}`, "airline", "base", "empty"},
		{`{"train": ["0", "0"]}`, "airline", "train", "duplicate"},
		{`{"train": 5}`, "airline", "train", "split file"},
		{`{"train": ["0"]}`, "../x", "train", "domain"},
	} {
		if _, err := ParseSplit([]byte(c.data), c.domain, c.split); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.data, err, c.want)
		}
	}
}

// tau2DataDir finds the real τ² data (TAU2_DATA_DIR, else ../shared/tau2-data next to the module root).
func tau2DataDir(t *testing.T) string {
	if d := os.Getenv("TAU2_DATA_DIR"); d != "" {
		return d
	}
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(dir, "..", "shared", "tau2-data")
			if _, err := os.Stat(cand); err == nil {
				return cand
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Skip("τ² data not found: set TAU2_DATA_DIR or place it at ../shared/tau2-data next to the module root")
	return ""
}

func TestLoadTasksRealData(t *testing.T) {
	dir := tau2DataDir(t)
	ts, err := LoadTasks(dir, []Source{{Domain: "airline", Split: "train"}, {Domain: "retail", Split: "train"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) < 30 || ts[0].Domain != "airline" || ts[len(ts)-1].Domain != "retail" {
		t.Fatalf("%d tasks: first %+v last %+v", len(ts), ts[0], ts[len(ts)-1])
	}
	if _, err := LoadTasks(dir, []Source{{Domain: "nosuch", Split: "train"}}); err == nil {
		t.Fatal("missing domain accepted")
	}
}

// TestLoadTasksWithoutSplitFile: banking_knowledge has no split_tasks.json;
// as upstream (and tau2/data.LoadSplit), any split name is all 97 tasks in
// file order, task_ids still select among them, and the split name must
// still be a safe path component. The trainer exited at start-up on it
// ("open …/split_tasks.json: no such file or directory").
func TestLoadTasksWithoutSplitFile(t *testing.T) {
	dir := tau2DataDir(t)
	for _, split := range []string{"base", "train"} {
		ts, err := LoadTasks(dir, []Source{{Domain: "banking_knowledge", Split: split}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 97 || ts[0] != (Task{Domain: "banking_knowledge", Split: split, ID: "task_001"}) || ts[96].ID != "task_102" {
			t.Fatalf("split %s: %d tasks, first %+v last %+v", split, len(ts), ts[0], ts[len(ts)-1])
		}
	}
	ts, err := LoadTasks(dir, []Source{{Domain: "banking_knowledge", Split: "base", TaskIDs: []string{"task_005", "task_001"}}})
	if err != nil || len(ts) != 2 || ts[0].ID != "task_005" {
		t.Fatalf("task_ids: %+v %v", ts, err)
	}
	if _, err := LoadTasks(dir, []Source{{Domain: "banking_knowledge", Split: "../x"}}); err == nil {
		t.Fatal("unsafe split name accepted")
	}
}

func TestLoadTasksTaskIDs(t *testing.T) {
	dir := tau2DataDir(t)
	all, err := LoadTasks(dir, []Source{{Domain: "airline", Split: "train"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{all[3].ID, all[0].ID}
	ts, err := LoadTasks(dir, []Source{{Domain: "airline", Split: "train", TaskIDs: want}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0] != all[3] || ts[1] != all[0] {
		t.Fatalf("task_ids %v selected %+v", want, ts)
	}
	for _, bad := range []struct {
		ids  []string
		want string
	}{
		{[]string{all[0].ID, "no-such-task"}, `has no task "no-such-task"`},
		{[]string{all[1].ID, all[1].ID}, "named twice"},
	} {
		_, err := LoadTasks(dir, []Source{{Domain: "airline", Split: "train", TaskIDs: bad.ids}})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("task_ids %v: error %v, want one containing %q", bad.ids, err, bad.want)
		}
	}
}

// FuzzParseSplit: split files are outside input; parsing must never panic and every returned task
// must be well formed.
func FuzzParseSplit(f *testing.F) {
	f.Add([]byte(`{"train": ["0", "1"], "test": ["2"]}`), "train")
	f.Add([]byte(`{"train": []}`), "train")
	f.Add([]byte(`[1,2]`), "x")
	f.Fuzz(func(t *testing.T, data []byte, split string) {
		ts, err := ParseSplit(data, "airline", split)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, task := range ts {
			if task.ID == "" || seen[task.ID] || task.Split != split {
				t.Fatalf("bad task %+v", task)
			}
			seen[task.ID] = true
		}
	})
}
