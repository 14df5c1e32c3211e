package pyjson

import "testing"

// Maps held by value inside a model (τ²'s dict fields, e.g. mock's tasks) must be compared by
// content: two models that differ only there are different DB states.
func TestEqualMapFieldByValue(t *testing.T) {
	type model struct {
		Name  string     `json:"name"`
		Tasks Map[int64] `json:"tasks"`
	}
	mk := func(kv ...any) *model {
		m := &model{Name: "db"}
		for i := 0; i < len(kv); i += 2 {
			m.Tasks.Set(kv[i].(string), int64(kv[i+1].(int)))
		}
		return m
	}
	tests := []struct {
		name string
		a, b *model
		want bool
	}{
		{"same", mk("t1", 1, "t2", 2), mk("t1", 1, "t2", 2), true},
		{"empty", mk(), mk(), true},
		{"extra key", mk("t1", 1), mk("t1", 1, "t2", 2), false},
		{"value differs", mk("t1", 1), mk("t1", 3), false},
		{"key differs", mk("t1", 1), mk("t9", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Equal(tt.a, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Equal = %v, want %v", got, tt.want)
			}
			// Held by value at the top level too.
			got, err = Equal(*tt.a, *tt.b)
			if err != nil || got != tt.want {
				t.Fatalf("Equal by value = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}
