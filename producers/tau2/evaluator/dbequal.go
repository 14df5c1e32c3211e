package evaluator

import (
	"bytes"
	"math"
	"reflect"
	"strings"

	"tau2rl/producers/tau2/env"
	"tau2rl/producers/tau2/pyjson"
)

// sameState reports whether two environments' agent and user DBs have
// equal τ² hashes (sha256 of json.dumps(model_dump(), sort_keys=True)).
//
// It does not use env.SameState: pyjson.Equal, under it, skips pyjson.Map
// fields held by value (it sees a struct without encodable fields), so two
// mock DBs with different tasks compare equal. Here copy-on-write Table
// fields go through pyjson.Equal (fast: only changed records), every other
// field is compared by its canonical sort_keys dump, which is exactly what
// τ²'s hash covers.
func sameState(a, b *env.Environment) (bool, error) {
	eq, err := sameDB(a.Agent.DB, b.Agent.DB)
	if err != nil || !eq {
		return eq, err
	}
	ua, ub := a.User.DB, b.User.DB
	if a.User.Toolkit == nil {
		ua = nil
	}
	if b.User.Toolkit == nil {
		ub = nil
	}
	return sameDB(ua, ub)
}

var marshalerType = reflect.TypeFor[pyjson.Marshaler]()

func sameDB(a, b env.DB) (bool, error) {
	na, nb := dbIsNil(a), dbIsNil(b)
	if na || nb {
		return na == nb, nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Type().Implements(marshalerType) {
		return dumpsEqual(a, b)
	}
	for va.Kind() == reflect.Pointer {
		if va.IsNil() || vb.IsNil() {
			return va.IsNil() == vb.IsNil(), nil
		}
		va, vb = va.Elem(), vb.Elem()
	}
	if va.Kind() != reflect.Struct || reflect.PointerTo(va.Type()).Implements(marshalerType) {
		return dumpsEqual(a, b)
	}
	t := va.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || strings.Split(f.Tag.Get("json"), ",")[0] == "-" {
			continue
		}
		var eq bool
		var err error
		if isTable(f.Type) {
			eq, err = pyjson.Equal(addr(va.Field(i)), addr(vb.Field(i)))
		} else {
			eq, err = valuesEqual(va.Field(i), vb.Field(i))
		}
		if err != nil || !eq {
			return eq, err
		}
	}
	return true, nil
}

// valuesEqual reports whether two values have equal sort_keys dumps. Equal
// Go values (fastEqual: floats bit for bit) have equal dumps; otherwise
// lists of the same length are compared element by element (a list's dump
// is its elements' dumps joined, so this is exact) and anything else by
// its dump.
func valuesEqual(a, b reflect.Value) (bool, error) {
	if fastEqual(a, b, 0) {
		return true, nil
	}
	if a.Kind() == reflect.Slice && a.Type() == b.Type() && !a.IsNil() && !b.IsNil() &&
		!a.Type().Implements(marshalerType) && !reflect.PointerTo(a.Type()).Implements(marshalerType) {
		if a.Len() != b.Len() {
			return false, nil
		}
		for i := 0; i < a.Len(); i++ {
			ea, eb := a.Index(i), b.Index(i)
			if fastEqual(ea, eb, 0) {
				continue
			}
			if eq, err := dumpsEqual(addr(ea), addr(eb)); err != nil || !eq {
				return eq, err
			}
		}
		return true, nil
	}
	return dumpsEqual(addr(a), addr(b))
}

// fastEqual is a conservative structural equality: true only when the two
// values are identical in every field (floats compared by their bits, so
// 0.0 and -0.0 differ as their dumps do). false means "compare dumps".
func fastEqual(a, b reflect.Value, depth int) bool {
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	if a.Type() != b.Type() || depth > 200 {
		return false
	}
	switch a.Kind() {
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.String:
		return a.String() == b.String()
	case reflect.Pointer:
		if a.UnsafePointer() == b.UnsafePointer() {
			return true
		}
		if a.IsNil() || b.IsNil() {
			return false
		}
		return fastEqual(a.Elem(), b.Elem(), depth+1)
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return fastEqual(a.Elem(), b.Elem(), depth+1)
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if a.Len() == 0 || a.UnsafePointer() == b.UnsafePointer() {
			return true
		}
		fallthrough
	case reflect.Array:
		for i := 0; i < a.Len(); i++ {
			if !fastEqual(a.Index(i), b.Index(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !fastEqual(a.Field(i), b.Field(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if a.UnsafePointer() == b.UnsafePointer() {
			return true
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !fastEqual(it.Value(), bv, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

func addr(v reflect.Value) any {
	if v.CanAddr() {
		return v.Addr().Interface()
	}
	return v.Interface()
}

func isTable(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && strings.HasPrefix(t.Name(), "Table[") &&
		t.PkgPath() == reflect.TypeFor[pyjson.Object]().PkgPath()
}

func dumpsEqual(a, b any) (bool, error) {
	da, err := pyjson.Append(nil, a, pyjson.Options{SortKeys: true})
	if err != nil {
		return false, evalErr("dump DB: %v", err)
	}
	db, err := pyjson.Append(nil, b, pyjson.Options{SortKeys: true})
	if err != nil {
		return false, evalErr("dump DB: %v", err)
	}
	return bytes.Equal(da, db), nil
}

func dbIsNil(db env.DB) bool {
	if db == nil {
		return true
	}
	v := reflect.ValueOf(db)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
