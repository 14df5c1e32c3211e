package pyjson

import (
	"math/big"
	"reflect"
)

// DeepCopy returns a deep copy of v: pointers, slices, Go maps, structs,
// Maps and generic values are copied recursively, so mutating the copy never
// touches v (Python's copy.deepcopy / a pydantic model copy). Tables are
// forked (copy-on-write). Unexported struct fields are copied shallowly.
func DeepCopy[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	out := reflect.New(rv.Type()).Elem()
	deepCopyRV(out, rv)
	res, _ := out.Interface().(T) // a nil interface value stays the zero T
	return res
}

var (
	deepCopierType = reflect.TypeFor[deepCopier]()
)

func deepCopyRV(dst, src reflect.Value) {
	t := src.Type()
	if t.Implements(deepCopierType) && src.Kind() == reflect.Pointer {
		if src.IsNil() {
			return
		}
		dst.Set(reflect.ValueOf(src.Interface().(deepCopier).deepCopyPy()))
		return
	}
	if src.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(deepCopierType) {
		c := addressable(src).Interface().(deepCopier).deepCopyPy()
		dst.Addr().Interface().(copyFromer).copyFrom(c)
		return
	}
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		if t == reflect.TypeFor[*big.Int]() {
			dst.Set(reflect.ValueOf(new(big.Int).Set(src.Interface().(*big.Int))))
			return
		}
		p := reflect.New(t.Elem())
		deepCopyRV(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := src.Elem()
		c := reflect.New(e.Type()).Elem()
		deepCopyRV(c, e)
		dst.Set(c)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(t, src.Len(), src.Len())
		for i := 0; i < src.Len(); i++ {
			deepCopyRV(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Array:
		for i := 0; i < src.Len(); i++ {
			deepCopyRV(dst.Index(i), src.Index(i))
		}
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(t, src.Len())
		it := src.MapRange()
		for it.Next() {
			c := reflect.New(t.Elem()).Elem()
			deepCopyRV(c, it.Value())
			m.SetMapIndex(it.Key(), c)
		}
		dst.Set(m)
	case reflect.Struct:
		dst.Set(src) // unexported fields shallow
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				deepCopyRV(dst.Field(i), src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}
