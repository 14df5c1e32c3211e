package airline

import (
	"strings"
	"sync"
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// FuzzCall decodes arbitrary argument strings for every airline tool on a
// fresh fork of the fixture DB: never a panic (a recovered panic would show
// up as "internal error"), the error flag always matches the content, and
// the fixture base is never modified.
func FuzzCall(f *testing.F) {
	seeds := readScenarios(f, "scenarios_fixture.json")
	for _, sc := range seeds {
		for _, c := range sc.Calls {
			f.Add(c[0], c[1])
		}
	}
	f.Add("book_reservation", `{"flights": {}, "passengers": "x", "payment_methods": [1]}`)
	f.Add("update_reservation_flights", `{"reservation_id": "NO6JO3", "cabin": "economy", "flights": [{"flight_number": 1, "date": null}], "payment_id": "x"}`)
	db := tau2test.Fixture(f, ParseDB)
	want, _ := env.DBHash(db)
	f.Fuzz(func(t *testing.T, name, args string) {
		e := NewEnvironment(db, "")
		out, isErr := e.Call(env.Assistant, name, args)
		if strings.Contains(out, "internal error in") {
			t.Fatalf("panic in %s(%s): %s", name, args, out)
		}
		if isErr != strings.HasPrefix(out, "Error: ") && name != "calculate" && name != "transfer_to_human_agents" {
			t.Fatalf("flag/content mismatch for %s(%s): %q %v", name, args, out, isErr)
		}
		if h, _ := env.DBHash(db); h != want {
			t.Fatalf("%s(%s) modified the shared base DB", name, args)
		}
	})
}

// TestConcurrentEpisodes runs many episodes at once over one loaded DB:
// each sees only its own writes and the base stays pristine (run with -race).
func TestConcurrentEpisodes(t *testing.T) {
	db := tau2test.Fixture(t, ParseDB)
	want, _ := env.DBHash(db)
	var wg sync.WaitGroup
	results := make([]string, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := NewEnvironment(db, "")
			for range 3 {
				e.Call(env.Assistant, "send_certificate", `{"user_id": "mei_hernandez_8984", "amount": 10}`)
			}
			e.Call(env.Assistant, "cancel_reservation", `{"reservation_id": "R9QDGB"}`)
			results[i], _ = e.Call(env.Assistant, "get_user_details", `{"user_id": "mei_hernandez_8984"}`)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != results[0] || strings.Count(r, "\"id\": \"certificate_322132") != 3 {
			t.Fatalf("episode %d saw %s", i, r)
		}
	}
	if h, _ := env.DBHash(db); h != want {
		t.Fatal("episodes modified the shared base DB")
	}
}
