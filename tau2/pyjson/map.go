package pyjson

import (
	"iter"
	"reflect"
)

// Map is an insertion-ordered dict with string keys, the Go counterpart of a
// Python dict. τ²'s tool outputs and first-match searches depend on dict
// order (file order for loaded data, insertion order for new entries), so
// every JSON-object collection in a domain model is a Map, never a Go map.
//
// Semantics follow Python: Set on an existing key replaces the value in
// place (the key keeps its position); Delete followed by Set appends the key
// at the end. The zero Map is empty and ready to use. A Map is not safe for
// concurrent mutation.
type Map[V any] struct {
	keys []string
	vals map[string]V
}

// Object is a decoded JSON object whose values are generic JSON values
// (see Loads for the value types).
type Object = Map[any]

// NewMap returns an empty Map with room for n entries.
func NewMap[V any](n int) *Map[V] {
	return &Map[V]{keys: make([]string, 0, n), vals: make(map[string]V, n)}
}

// NewObject returns an empty Object; pairs are alternating keys and values,
// added in order (handy in tests and for building tool results).
func NewObject(pairs ...any) *Object {
	o := NewMap[any](len(pairs) / 2)
	for i := 0; i+1 < len(pairs); i += 2 {
		o.Set(pairs[i].(string), pairs[i+1])
	}
	return o
}

// Len returns the number of entries.
func (m *Map[V]) Len() int {
	if m == nil {
		return 0
	}
	return len(m.keys)
}

// Get returns the value stored under k.
func (m *Map[V]) Get(k string) (V, bool) {
	if m == nil || m.vals == nil {
		var zero V
		return zero, false
	}
	v, ok := m.vals[k]
	return v, ok
}

// Has reports whether k is present (Python's `k in d`).
func (m *Map[V]) Has(k string) bool {
	if m == nil || m.vals == nil {
		return false
	}
	_, ok := m.vals[k]
	return ok
}

// Set stores v under k; an existing key keeps its position.
func (m *Map[V]) Set(k string, v V) {
	if m.vals == nil {
		m.vals = make(map[string]V)
	}
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

// Delete removes k (Python's `d.pop(k)`), reporting whether it was present.
func (m *Map[V]) Delete(k string) bool {
	if m == nil || m.vals == nil {
		return false
	}
	if _, ok := m.vals[k]; !ok {
		return false
	}
	delete(m.vals, k)
	for i, kk := range m.keys {
		if kk == k {
			m.keys = append(m.keys[:i:i], m.keys[i+1:]...)
			break
		}
	}
	return true
}

// Keys returns the keys in order. The slice must not be modified.
func (m *Map[V]) Keys() []string {
	if m == nil {
		return nil
	}
	return m.keys
}

// All iterates over the entries in order.
func (m *Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if m == nil {
			return
		}
		for _, k := range m.keys {
			if !yield(k, m.vals[k]) {
				return
			}
		}
	}
}

// Values returns the values in order (Python's `list(d.values())`).
func (m *Map[V]) Values() []V {
	out := make([]V, 0, m.Len())
	for _, v := range m.All() {
		out = append(out, v)
	}
	return out
}

// ShallowClone returns a new Map with the same entries (values not copied).
func (m *Map[V]) ShallowClone() *Map[V] {
	c := NewMap[V](m.Len())
	for k, v := range m.All() {
		c.Set(k, v)
	}
	return c
}

// Clone returns a deep copy: values are copied with DeepCopy.
func (m *Map[V]) Clone() *Map[V] {
	c := NewMap[V](m.Len())
	for k, v := range m.All() {
		c.Set(k, DeepCopy(v))
	}
	return c
}

// pyLen, pyRange and deepCopyPy let the reflection-based encoder, decoder and
// copier treat every Map[V] uniformly.
func (m *Map[V]) pyLen() int { return m.Len() }

func (m *Map[V]) pyRange(f func(k string, v any) error) error {
	if m == nil {
		return nil
	}
	for _, k := range m.keys {
		if err := f(k, m.vals[k]); err != nil {
			return err
		}
	}
	return nil
}

func (m *Map[V]) pyGet(k string) (any, bool) {
	v, ok := m.Get(k)
	return v, ok
}

func (m *Map[V]) deepCopyPy() any { return m.Clone() }

func (m *Map[V]) copyFrom(src any) { *m = *(src.(*Map[V])) }

// decodePy fills m from a decoded JSON object, validating each value into V.
func (m *Map[V]) decodePy(v any, path []any) error {
	o, ok := v.(*Object)
	if !ok {
		return NewValidationError("", append([]any{}, path...), "Input should be a valid dictionary", "dict_type", v)
	}
	*m = Map[V]{keys: make([]string, 0, o.Len()), vals: make(map[string]V, o.Len())}
	var errs []LineError
	for _, k := range o.keys {
		var dst V
		if err := fromValueRV(o.vals[k], reflect.ValueOf(&dst).Elem(), append(append([]any{}, path...), k), &errs); err != nil {
			return err
		}
		m.Set(k, dst)
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}

// mapLike is implemented by *Map[V] and *Table[V].
type mapLike interface {
	pyLen() int
	pyRange(f func(k string, v any) error) error
	pyGet(k string) (any, bool)
}

type deepCopier interface{ deepCopyPy() any }

type copyFromer interface{ copyFrom(src any) }

type pyDecoder interface {
	decodePy(v any, path []any) error
}

// RangeDict calls f for every entry of a dict-like value (*Map[V] of any V,
// *Table[V]) in order. It reports false when v is not dict-like.
func RangeDict(v any, f func(k string, v any) error) (bool, error) {
	if m, ok := v.(mapLike); ok {
		return true, m.pyRange(f)
	}
	return false, nil
}
