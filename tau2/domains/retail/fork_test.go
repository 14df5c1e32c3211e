package retail

import (
	"sync"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// TestForkIsolation branches an episode after a write (Environment.Fork
// folds the changed records into a new shared base) and checks that later
// writes on either branch stay private.
func TestForkIsolation(t *testing.T) {
	db := tau2test.Fixture(t, ParseDB)
	a := NewEnvironment(db, "")
	call := func(e *env.Environment, name, args string) string {
		t.Helper()
		out, isErr := e.Call(env.Assistant, name, args)
		if isErr {
			t.Fatalf("%s: %s", name, out)
		}
		return out
	}
	call(a, "cancel_pending_order", `{"order_id": "#W0000002", "reason": "no longer needed"}`)
	before, _, _ := a.Hashes()
	b := a.Fork()
	if same, err := env.SameState(a, b); err != nil || !same {
		t.Fatalf("fork differs: %v %v", same, err)
	}
	call(b, "modify_user_address", `{"user_id": "yusuf_rossi_9620", "address1": "x", "address2": "", "city": "c", "state": "s", "country": "USA", "zip": "1"}`)
	call(a, "modify_pending_order_payment", `{"order_id": "#W0000001", "payment_method_id": "paypal_1000002"}`)
	if h, _, _ := b.Fork().Hashes(); h == before {
		t.Error("branch b lost its write")
	}
	if same, _ := env.SameState(a, b); same {
		t.Error("branches share a write")
	}
	ua := call(a, "get_user_details", `{"user_id": "yusuf_rossi_9620"}`)
	ub := call(b, "get_user_details", `{"user_id": "yusuf_rossi_9620"}`)
	if ua == ub {
		t.Error("user address change leaked into branch a")
	}
	oa := call(a, "get_order_details", `{"order_id": "#W0000001"}`)
	ob := call(b, "get_order_details", `{"order_id": "#W0000001"}`)
	if oa == ob {
		t.Error("payment change leaked into branch b")
	}
	fresh, _, _ := NewEnvironment(db, "").Hashes()
	pristine, _ := env.DBHash(tau2test.Fixture(t, ParseDB))
	if fresh != pristine {
		t.Error("base DB modified")
	}
}

// TestConcurrentEpisodes runs the gold replays of all HEAD tasks from
// several goroutines at once over one loaded DB (run with -race).
func TestConcurrentEpisodes(t *testing.T) {
	dir, _ := realBase(t)
	golden := readReplayGolden(t)
	tasks, err := data.LoadTasks(dir, Domain, data.Head)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(tasks); i += 2 {
				task := tasks[i]
				e, err := env.New(Domain, env.Options{DataDir: dir})
				if err != nil {
					t.Error(err)
					return
				}
				if _, _, err := replayGold(e, task); err != nil {
					t.Error(err)
					return
				}
				if h, _, err := e.Hashes(); err != nil || h != golden.Head[task.ID].DBHash {
					t.Errorf("task %s: hash %s (%v)", task.ID, h, err)
				}
			}
		}()
	}
	wg.Wait()
}
