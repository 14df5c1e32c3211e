package uuid

import (
	"regexp"
	"testing"
)

var v4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if !v4.MatchString(id) {
			t.Fatalf("%q is not a canonical version-4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("%q drawn twice", id)
		}
		seen[id] = true
	}
}
