package retail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

// FuzzToolCall feeds arbitrary argument JSON to every retail tool (and to
// arbitrary tool names): the result is always a tool message, never a
// panic; the episode DB still dumps; the shared base DB is never modified
// (every mutation went through copy-on-write).
func FuzzToolCall(f *testing.F) {
	names := Toolkit.Names()
	for i, n := range names {
		f.Add(uint8(i), n, `{}`)
	}
	f.Add(uint8(2), "", `{"order_id": "#W0000003", "item_ids": "", "new_item_ids": {}, "payment_method_id": "paypal_1000002"}`)
	f.Add(uint8(11), "", `{"order_id": "#W0000001", "item_ids": ["2000000011", "2000000021"], "new_item_ids": ["2000000012", "2000000022"], "payment_method_id": "credit_card_9513926"}`)
	f.Add(uint8(1), "", `{"order_id": "#W0000008", "reason": "no longer needed"}`)
	f.Add(uint8(12), "", `{"order_id": "#W0000010", "payment_method_id": "credit_card_3000002"}`)
	f.Add(uint8(14), "", `{"order_id": "#W0000009", "item_ids": [1e400, NaN], "payment_method_id": "credit_card_3000002"}`)
	f.Add(uint8(10), "", `{"order_id": "#W0000001", "address1": [], "address2": {}, "city": 1, "state": null, "country": true, "zip": "\ud800"}`)
	f.Add(uint8(3), "", `{"first_name": "\u0130", "last_name": "\u03a3", "zip": 1}`)
	f.Add(uint8(0), "", `{"expression": ["1", {"a": 2}]}`)
	f.Add(uint8(0), "nope", `[1, 2`)
	db := tau2test.Fixture(f, ParseDB)
	base, err := env.DBHash(db)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, idx uint8, name, args string) {
		if name == "" {
			name = names[int(idx)%len(names)]
		}
		e := NewEnvironment(db, "")
		obj, derr := env.DecodeArguments(args)
		if derr != nil {
			if content, isErr := e.Call(env.Assistant, name, args); !isErr || !strings.HasPrefix(content, "Error: ") {
				t.Fatalf("malformed args %q gave a result: %s", args, content)
			}
			return
		}
		if _, err := e.MakeToolCall(env.Assistant, name, obj); err != nil {
			var p *env.PanicError
			if errors.As(err, &p) {
				t.Fatalf("%s(%s) panicked: %v\n%s", name, args, p.Value, p.Stack)
			}
		}
		content, _ := e.CallObject(env.Assistant, name, obj)
		if strings.Contains(content, "internal error in") {
			t.Fatalf("%s(%s): %s", name, args, content)
		}
		if _, _, err := e.Hashes(); err != nil {
			t.Fatalf("%s(%s): DB no longer dumps: %v", name, args, err)
		}
		if h, err := env.DBHash(db); err != nil || h != base {
			t.Fatalf("%s(%s) modified the shared base DB", name, args)
		}
	})
}

// FuzzParseDB feeds arbitrary JSON to ParseDB: errors, never panics; a DB
// that parses dumps and forks.
func FuzzParseDB(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "fixture_db.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"products": {}, "users": {}, "orders": {}}`))
	f.Add([]byte(`{"products": {}, "users": {"u": {"payment_methods": {"p": {"source": "bitcoin"}}}}, "orders": {}}`))
	f.Add([]byte(`{"products": {}, "users": {}, "orders": {"o": {"status": "lost"}}, "extra": 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		db, err := ParseDB(b)
		if err != nil {
			return
		}
		if _, err := pyjson.DumpsSorted(db); err != nil {
			t.Fatalf("valid DB does not dump: %v", err)
		}
		e := NewEnvironment(db, "")
		e.Call(env.Assistant, "list_all_product_types", "{}")
		if _, _, err := e.Hashes(); err != nil {
			t.Fatal(err)
		}
	})
}
