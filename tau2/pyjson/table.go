package pyjson

import (
	"bytes"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"sync"
)

// Table is a copy-on-write ordered dict of records: the type for the large
// top-level collections of a domain DB (airline flights, users,
// reservations). A loaded DB is immutable and shared by every episode; each
// episode works on a Fork, which costs O(1) and copies a record only when the
// episode first asks to mutate it (Mut). Iteration order and Python dict
// semantics are those of Map.
//
// Rules for tool code: values returned by Get and All are shared with other
// episodes and must not be modified; call Mut to obtain a private, mutable
// record; use Set for new or replaced records.
//
// A Table is owned by one goroutine. Forking a pristine table (one without
// changes, such as the loaded base) is read-only and safe from any number of
// goroutines at once.
type Table[V any] struct {
	base  *tableBase[V]
	over  map[string]V        // records owned by this table (mutated or new)
	del   map[string]struct{} // base keys deleted
	added []string            // keys after the base order: new keys, in insertion order
}

type tableBase[V any] struct {
	m Map[V] // frozen

	encOnce    sync.Once
	sortedKeys []string
	enc        map[string][]byte // json.dumps(record, sort_keys=True)
	encErr     error
}

// NewTable returns a Table whose base is m; m must not be modified afterwards.
func NewTable[V any](m *Map[V]) Table[V] {
	if m == nil {
		m = &Map[V]{}
	}
	return Table[V]{base: &tableBase[V]{m: *m}}
}

func (t *Table[V]) baseMap() *Map[V] {
	if t.base == nil {
		t.base = &tableBase[V]{}
	}
	return &t.base.m
}

func (t *Table[V]) pristine() bool {
	return len(t.over) == 0 && len(t.del) == 0 && len(t.added) == 0
}

// Fork returns an independent copy-on-write view of t. Forking a pristine
// table allocates nothing but the result; forking a changed table keeps the
// shared base and deep-copies only the changed records, so forks of one
// loaded DB can always be compared through their changes (Equal).
func (t *Table[V]) Fork() Table[V] {
	if t.base == nil {
		t.base = &tableBase[V]{}
	}
	f := Table[V]{base: t.base}
	if t.pristine() {
		return f
	}
	if len(t.over) > 0 {
		f.over = make(map[string]V, len(t.over))
		for k, v := range t.over {
			f.over[k] = DeepCopy(v)
		}
	}
	if len(t.del) > 0 {
		f.del = make(map[string]struct{}, len(t.del))
		for k := range t.del {
			f.del[k] = struct{}{}
		}
	}
	f.added = slices.Clone(t.added)
	return f
}

// Len returns the number of records.
func (t *Table[V]) Len() int {
	return t.baseMap().Len() - len(t.del) + len(t.added)
}

// Get returns the record under k. It may be shared: do not modify it.
func (t *Table[V]) Get(k string) (V, bool) {
	if v, ok := t.over[k]; ok {
		return v, true
	}
	if _, gone := t.del[k]; gone {
		var zero V
		return zero, false
	}
	return t.baseMap().Get(k)
}

// Has reports whether k is present.
func (t *Table[V]) Has(k string) bool {
	_, ok := t.Get(k)
	return ok
}

// Mut returns a private, mutable record for k, deep-copying the shared
// record on first use.
func (t *Table[V]) Mut(k string) (V, bool) {
	if v, ok := t.over[k]; ok {
		return v, true
	}
	if _, gone := t.del[k]; gone {
		var zero V
		return zero, false
	}
	v, ok := t.baseMap().Get(k)
	if !ok {
		return v, false
	}
	c := DeepCopy(v)
	if t.over == nil {
		t.over = make(map[string]V)
	}
	t.over[k] = c
	return c, true
}

// Set stores v under k (an existing key keeps its position). The table takes
// ownership of v.
func (t *Table[V]) Set(k string, v V) {
	if t.over == nil {
		t.over = make(map[string]V)
	}
	_, inOver := t.over[k]
	_, gone := t.del[k]
	if !inOver && (gone || !t.baseMap().Has(k)) {
		t.added = append(t.added, k)
	}
	t.over[k] = v
}

// Delete removes k, reporting whether it was present.
func (t *Table[V]) Delete(k string) bool {
	if i := slices.Index(t.added, k); i >= 0 {
		t.added = slices.Delete(t.added, i, i+1)
		delete(t.over, k)
		return true
	}
	if _, gone := t.del[k]; gone || !t.baseMap().Has(k) {
		return false
	}
	if t.del == nil {
		t.del = make(map[string]struct{})
	}
	t.del[k] = struct{}{}
	delete(t.over, k)
	return true
}

// All iterates over the records in dict order. Records may be shared.
func (t *Table[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for k, v := range t.baseMap().All() {
			if _, gone := t.del[k]; gone {
				continue
			}
			if o, ok := t.over[k]; ok {
				v = o
			}
			if !yield(k, v) {
				return
			}
		}
		for _, k := range t.added {
			if !yield(k, t.over[k]) {
				return
			}
		}
	}
}

// Keys returns the keys in dict order (a fresh slice).
func (t *Table[V]) Keys() []string {
	out := make([]string, 0, t.Len())
	for k := range t.All() {
		out = append(out, k)
	}
	return out
}

// Changed returns the keys whose records differ from the base: mutated,
// added or deleted ones (sorted), for diffs and fast equality.
func (t *Table[V]) Changed() []string {
	out := make([]string, 0, len(t.over)+len(t.del))
	for k := range t.over {
		out = append(out, k)
	}
	for k := range t.del {
		if _, ok := t.over[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (t *Table[V]) pyLen() int { return t.Len() }

func (t *Table[V]) pyRange(f func(k string, v any) error) error {
	for k, v := range t.All() {
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (t *Table[V]) pyGet(k string) (any, bool) { return t.Get(k) }

func (t *Table[V]) deepCopyPy() any {
	f := t.Fork()
	return &f
}

func (t *Table[V]) copyFrom(src any) { *t = *(src.(*Table[V])) }

func (t *Table[V]) decodePy(v any, path []any) error {
	var m Map[V]
	if err := m.decodePy(v, path); err != nil {
		return err
	}
	*t = NewTable(&m)
	return nil
}

// baseEncodings returns the sorted base keys and the canonical encoding of
// every base record, computed once per base and shared by all forks.
func (b *tableBase[V]) baseEncodings() ([]string, map[string][]byte, error) {
	b.encOnce.Do(func() {
		b.sortedKeys = slices.Clone(b.m.keys)
		slices.Sort(b.sortedKeys)
		b.enc = make(map[string][]byte, len(b.sortedKeys))
		e := &encoder{opt: Options{SortKeys: true}}
		for _, k := range b.m.keys {
			enc, err := e.value(nil, reflect.ValueOf(b.m.vals[k]), 1)
			if err != nil {
				b.encErr = fmt.Errorf("pyjson: encode record %q: %w", k, err)
				return
			}
			b.enc[k] = enc
		}
	})
	return b.sortedKeys, b.enc, b.encErr
}

func (t *Table[V]) appendPy(e *encoder, dst []byte, depth int) ([]byte, error) {
	if !e.opt.SortKeys || e.opt.UTF8 {
		return e.mapLike(dst, t, depth)
	}
	t.baseMap()
	keys, enc, err := t.base.baseEncodings()
	if err != nil {
		return dst, err
	}
	live := keys
	if !t.pristine() {
		live = make([]string, 0, t.Len())
		for _, k := range keys {
			if _, gone := t.del[k]; !gone {
				live = append(live, k)
			}
		}
		for _, k := range t.added {
			if _, dup := slices.BinarySearch(live, k); !dup {
				i, _ := slices.BinarySearch(live, k)
				live = slices.Insert(live, i, k)
			}
		}
	}
	dst = append(dst, '{')
	for i, k := range live {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendString(dst, k, true)
		dst = append(dst, ": "...)
		if v, ok := t.over[k]; ok {
			if dst, err = e.value(dst, reflect.ValueOf(v), depth+1); err != nil {
				return dst, err
			}
		} else {
			dst = append(dst, enc[k]...)
		}
		dst = e.flush(dst)
	}
	return append(dst, '}'), nil
}

// tableLike exposes a Table's base identity and changes to Equal.
type tableLike interface {
	baseID() any
	Changed() []string
	pyGet(k string) (any, bool)
}

func (t *Table[V]) baseID() any { t.baseMap(); return t.base }

// Equal reports whether a and b have the same canonical dump
// (json.dumps(..., sort_keys=True) byte-equal, hence equal τ² DB hashes).
// Tables that share a base are compared through their changes only, so
// comparing two forks of a 7 MB DB costs time proportional to what the
// episodes changed.
func Equal(a, b any) (bool, error) {
	return equalRV(reflect.ValueOf(a), reflect.ValueOf(b))
}

var tableLikeType = reflect.TypeFor[tableLike]()

func equalRV(a, b reflect.Value) (bool, error) {
	if !a.IsValid() || !b.IsValid() || a.Type() != b.Type() {
		return encodingsEqual(a, b)
	}
	t := a.Type()
	if a.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(tableLikeType) {
		return equalRV(addressable(a), addressable(b))
	}
	if t.Implements(tableLikeType) && a.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil() {
		ta, tb := a.Interface().(tableLike), b.Interface().(tableLike)
		if ta.baseID() == tb.baseID() {
			keys := append(ta.Changed(), tb.Changed()...)
			slices.Sort(keys)
			keys = slices.Compact(keys)
			for _, k := range keys {
				va, oka := ta.pyGet(k)
				vb, okb := tb.pyGet(k)
				if oka != okb {
					return false, nil
				}
				if !oka {
					continue
				}
				eq, err := encodingsEqual(reflect.ValueOf(va), reflect.ValueOf(vb))
				if err != nil || !eq {
					return eq, err
				}
			}
			return true, nil
		}
		return encodingsEqual(a, b)
	}
	if a.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(mapLikeType) {
		// A Map held by value (a struct field): its methods have pointer receivers, so compare
		// through pointers; the struct walk below would see no fields and call any two equal.
		return encodingsEqual(addressable(a), addressable(b))
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) || t.Implements(mapLikeType) {
		return encodingsEqual(a, b)
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil(), nil
		}
		return equalRV(a.Elem(), b.Elem())
	case reflect.Struct:
		si := structFields(t)
		for _, f := range si.fields {
			eq, err := equalRV(a.FieldByIndex(f.index), b.FieldByIndex(f.index))
			if err != nil || !eq {
				return eq, err
			}
		}
		return true, nil
	}
	return encodingsEqual(a, b)
}

func encodingsEqual(a, b reflect.Value) (bool, error) {
	e := &encoder{opt: Options{SortKeys: true}}
	ea, err := e.value(nil, a, 0)
	if err != nil {
		return false, err
	}
	eb, err := e.value(nil, b, 0)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ea, eb), nil
}
