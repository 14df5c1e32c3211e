package episode

import (
	"strings"
	"testing"
)

func TestTagRoundTrip(t *testing.T) {
	for _, tg := range []Tag{
		{Episode: "0b9c-11", Role: "a", Call: 0, Domain: "airline", TaskID: "3"},
		{Episode: "e", Role: "u", Call: 12, Domain: "telecom", TaskID: "[mobile_data_issue]airplane_mode_on|data_mode_off/x y"},
	} {
		got, err := ParseTag(tg.String())
		if err != nil || got != tg {
			t.Errorf("%q: %+v %v", tg.String(), got, err)
		}
	}
	for _, bad := range []string{"", "tau2rl/", "tau2rl/e/a1/d", "tau2rl/e/x1/d/t", "tau2rl/e/a-1/d/t", "tau2rl//a1/d/t", "other/e/a1/d/t", "tau2rl/e/a/d/t"} {
		if _, err := ParseTag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseTag: tags come from request bodies of any client; parsing never
// panics, and what parses renders back to the same text.
func FuzzParseTag(f *testing.F) {
	f.Add("tau2rl/ep/a0/airline/1")
	f.Add("tau2rl/ep/u17/telecom/[x]y|z/w")
	f.Add("tau2rl/ep/a99999999999999999999/d/t")
	f.Add("tau2rl/////")
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTag(s)
		if err != nil {
			return
		}
		if strings.Contains(tg.Episode, "/") || strings.Contains(tg.Domain, "/") {
			t.Fatalf("%q: slash in episode or domain: %+v", s, tg)
		}
		back, err := ParseTag(tg.String())
		if err != nil || back != tg {
			t.Fatalf("%q → %+v → %q → %+v %v", s, tg, tg.String(), back, err)
		}
	})
}
