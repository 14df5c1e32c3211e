package evaluator

import (
	"bytes"
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
		fa, fb := addr(va.Field(i)), addr(vb.Field(i))
		var eq bool
		var err error
		if isTable(f.Type) {
			eq, err = pyjson.Equal(fa, fb)
		} else {
			eq, err = dumpsEqual(fa, fb)
		}
		if err != nil || !eq {
			return eq, err
		}
	}
	return true, nil
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
