package data

import (
	"slices"
	"strings"
	"testing"
)

func TestSelectIDs(t *testing.T) {
	items := []string{"0", "1", "7", "11"}
	id := func(s string) string { return s }
	for _, c := range []struct {
		ids  []string
		want []string
		err  string
	}{
		{[]string{"11", "0"}, []string{"11", "0"}, ""},
		{[]string{}, []string{}, ""},
		{[]string{"7", "9"}, nil, `has no task "9"`},
		{[]string{"7", "1", "7"}, nil, `task "7" named twice`},
	} {
		got, err := SelectIDs(items, id, c.ids)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: err %v, want %q", c.ids, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%v: %v %v, want %v", c.ids, got, err, c.want)
		}
	}
}
