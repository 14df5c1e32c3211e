package airline

import (
	"os"
	"path/filepath"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/tau2test"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// BenchmarkFork measures giving an episode its own copy of the 7 MB
// airline DB (target: microseconds).
func BenchmarkFork(b *testing.B) {
	_, base := realBase(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = base.DB.Fork()
	}
}

// BenchmarkNewEnvironment is env.New("airline") after the first load.
func BenchmarkNewEnvironment(b *testing.B) { tau2test.BenchNewEnvironment(b, "airline") }

// BenchmarkDeepCopyDB is the alternative design (a full deep copy of every
// record), for comparison with Fork.
func BenchmarkDeepCopyDB(b *testing.B) {
	_, base := realBase(b)
	for b.Loop() {
		for _, v := range base.DB.Flights.All() {
			_ = pyjson.DeepCopy(v)
		}
		for _, v := range base.DB.Users.All() {
			_ = pyjson.DeepCopy(v)
		}
		for _, v := range base.DB.Reservations.All() {
			_ = pyjson.DeepCopy(v)
		}
	}
}

func mutatedEnv(b *testing.B, dir string) *env.Environment {
	e, err := env.New("airline", env.Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if _, isErr := e.Call(env.Assistant, "cancel_reservation", `{"reservation_id": "4WQ150"}`); isErr {
		b.Fatal("cancel failed")
	}
	if _, isErr := e.Call(env.Assistant, "send_certificate", `{"user_id": "mia_li_3668", "amount": 50}`); isErr {
		b.Fatal("certificate failed")
	}
	return e
}

// BenchmarkHash is τ²'s full DB hash (sha256 over the 7 MB sort_keys dump)
// of an episode DB with two changed records.
func BenchmarkHash(b *testing.B) {
	dir, _ := realBase(b)
	e := mutatedEnv(b, dir)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.Hashes(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSameState compares two episode DBs (the grader's DB check).
func BenchmarkSameState(b *testing.B) {
	dir, _ := realBase(b)
	x, y := mutatedEnv(b, dir), mutatedEnv(b, dir)
	b.ReportAllocs()
	for b.Loop() {
		if same, err := env.SameState(x, y); err != nil || !same {
			b.Fatal(same, err)
		}
	}
}

// BenchmarkCallGetUser is one read tool call end to end (decode, dispatch,
// serialize).
func BenchmarkCallGetUser(b *testing.B) {
	dir, _ := realBase(b)
	e := mutatedEnv(b, dir)
	b.ReportAllocs()
	for b.Loop() {
		if _, isErr := e.Call(env.Assistant, "get_user_details", `{"user_id": "mia_li_3668"}`); isErr {
			b.Fatal("error")
		}
	}
}

// BenchmarkCallBook is a booking on a fresh episode (write path incl. copy
// on write of the user and flight records).
func BenchmarkCallBook(b *testing.B) {
	dir, _ := realBase(b)
	args := `{"user_id": "mia_li_3668", "origin": "JFK", "destination": "MIA", "flight_type": "one_way", "cabin": "economy", "flights": [{"flight_number": "HAT014", "date": "2024-05-20"}], "passengers": [{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}], "payment_methods": [{"payment_id": "credit_card_4421486", "amount": 143}], "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}`
	b.ReportAllocs()
	for b.Loop() {
		e, err := env.New("airline", env.Options{DataDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if out, isErr := e.Call(env.Assistant, "book_reservation", args); isErr {
			b.Fatal(out)
		}
	}
}

// BenchmarkParseDB is the once-per-process load of db.json (7 MB).
func BenchmarkParseDB(b *testing.B) {
	dir, _ := realBase(b)
	raw, err := os.ReadFile(filepath.Join(data.DomainDir(dir, "airline"), "db.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ParseDB(raw); err != nil {
			b.Fatal(err)
		}
	}
}
