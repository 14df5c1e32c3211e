package retail

import (
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// BenchmarkFork measures giving an episode its own copy of the 2.8 MB
// retail DB (copy-on-write: O(1)).
func BenchmarkFork(b *testing.B) {
	_, base := realBase(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = base.DB.Fork()
	}
}

// BenchmarkNewEnvironment is env.New("retail") after the first load.
func BenchmarkNewEnvironment(b *testing.B) { tau2test.BenchNewEnvironment(b, Domain) }

func headTasks(b *testing.B) (string, []*data.Task) {
	dir, _ := realBase(b)
	tasks, err := data.LoadTasks(dir, Domain, data.Head)
	if err != nil {
		b.Fatal(err)
	}
	return dir, tasks
}

// BenchmarkGoldReplay is the grader's gold side per task: a fresh
// environment (DB copy) plus the replay of the task's gold actions
// (average 4.8 actions), over all 114 HEAD tasks; ns/task is reported.
func BenchmarkGoldReplay(b *testing.B) {
	dir, tasks := headTasks(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, task := range tasks {
			e, err := env.New(Domain, env.Options{DataDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range task.EvaluationCriteria.Actions {
				e.MakeToolCall(a.Requestor, a.Name, a.Arguments)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tasks)), "ns/task")
}

// BenchmarkGoldReplaySameState adds the DB comparison the grader makes
// (two replays compared with env.SameState) per task.
func BenchmarkGoldReplaySameState(b *testing.B) {
	dir, tasks := headTasks(b)
	replay := func(task *data.Task) *env.Environment {
		e, err := env.New(Domain, env.Options{DataDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range task.EvaluationCriteria.Actions {
			e.MakeToolCall(a.Requestor, a.Name, a.Arguments)
		}
		return e
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, task := range tasks {
			if same, err := env.SameState(replay(task), replay(task)); err != nil || !same {
				b.Fatal(same, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tasks)), "ns/task")
}

// BenchmarkHash is τ²'s full DB hash (sha256 over the sort_keys dump) of
// an episode DB after task 3's gold replay.
func BenchmarkHash(b *testing.B) {
	dir, tasks := headTasks(b)
	e, err := env.New(Domain, env.Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range tasks[3].EvaluationCriteria.Actions {
		e.MakeToolCall(a.Requestor, a.Name, a.Arguments)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.Hashes(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallGetUser is one read tool call end to end (decode, dispatch,
// serialize).
func BenchmarkCallGetUser(b *testing.B) {
	dir, _ := realBase(b)
	e, err := env.New(Domain, env.Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if out, isErr := e.Call(env.Assistant, "get_user_details", `{"user_id": "yusuf_rossi_9620"}`); isErr {
			b.Fatal(out)
		}
	}
}

// BenchmarkCallFindUserByNameZip is the slowest read: a scan of the 500
// users with Python-exact lowercasing.
func BenchmarkCallFindUserByNameZip(b *testing.B) {
	dir, _ := realBase(b)
	e, err := env.New(Domain, env.Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if out, isErr := e.Call(env.Assistant, "find_user_id_by_name_zip", `{"first_name": "Nobody", "last_name": "Here", "zip": "00000"}`); !isErr {
			b.Fatal(out)
		}
	}
}

// BenchmarkCallModifyItems is a write on a fresh episode (copy on write of
// the order and user records, serialization of the order).
func BenchmarkCallModifyItems(b *testing.B) {
	dir, _ := realBase(b)
	args := `{"order_id": "#W4776164", "item_ids": ["8349118980"], "new_item_ids": ["9647292434"], "payment_method_id": "credit_card_9513926"}`
	b.ReportAllocs()
	for b.Loop() {
		e, err := env.New(Domain, env.Options{DataDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if out, isErr := e.Call(env.Assistant, "modify_pending_order_items", args); isErr {
			b.Fatal(out)
		}
	}
}
