package banking_knowledge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/pyjson"
)

// TestScenariosAgainstReference runs the hand-written call lists of
// testdata/scenarios.json (error paths, wrong argument types, repeated
// calls, every discoverable tool; written by testdata/oracle/gen_scenarios.py)
// and compares every result and the final DB hash with upstream's tools
// (testdata/golden/scenarios.json). Where upstream raised, the Go call must
// fail too (a tool error).
func TestScenariosAgainstReference(t *testing.T) {
	golden := readGolden(t, "scenarios.json")
	b, err := os.ReadFile(filepath.Join("testdata", "scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var scenarios []struct {
		Name  string `json:"name"`
		Calls []struct {
			Requestor string          `json:"requestor"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(b, &scenarios); err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios {
		t.Run(s.Name, func(t *testing.T) {
			g, ok := golden[s.Name]
			if !ok {
				t.Fatalf("no golden for %s", s.Name)
			}
			e := newEnv(t, &data.Task{ID: s.Name})
			for i, c := range s.Calls {
				args, err := pyjson.LoadsObject(string(c.Arguments))
				if err != nil {
					t.Fatal(err)
				}
				got := result(e, c.Requestor, c.Name, args)
				want := g.Results[i]
				if strings.HasPrefix(want, "EXC ") {
					if !strings.HasPrefix(got, "EXC ") {
						t.Errorf("call %d (%s): got %q, upstream raised %q", i, c.Name, got, want)
					}
					continue
				}
				if got != want {
					t.Errorf("call %d (%s %s):\n got: %q\nwant: %q", i, c.Name, c.Arguments, got, want)
				}
			}
			h, _, err := e.Hashes()
			if err != nil {
				t.Fatal(err)
			}
			if h != g.Hash {
				t.Errorf("DB hash %s, upstream %s", h, g.Hash)
			}
		})
	}
}
