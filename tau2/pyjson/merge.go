package pyjson

import (
	"fmt"
	"reflect"
)

// MergeValue returns dst updated with src using addict.Dict.update
// semantics, which τ² uses to apply a task's initialization_data: for every
// key of src, if both sides hold a dict the merge recurses, otherwise the
// src value replaces the dst value (lists are replaced, not merged). dst is
// not modified; shared sub-values of src are deep-copied.
func MergeValue(dst, src any) any {
	so, ok := src.(*Object)
	do, ok2 := dst.(*Object)
	if !ok || !ok2 {
		return DeepCopy(src)
	}
	out := do.ShallowClone()
	for k, sv := range so.All() {
		if dv, ok := out.Get(k); ok {
			out.Set(k, MergeValue(dv, sv))
		} else {
			out.Set(k, DeepCopy(sv))
		}
	}
	return out
}

// MergeInto applies update (initialization_data) to the model that ptr
// points to, like τ²'s update_pydantic_model_with_dict: the model is dumped,
// deep-merged with update and validated again. Table and Map fields are
// merged record by record, so updating a few records of a large DB does not
// dump the whole DB. Keys that are not fields of the model are an error
// (τ² DB models forbid extra fields).
func MergeInto(ptr any, update *Object) error {
	rv := reflect.ValueOf(ptr)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("pyjson: MergeInto needs a pointer to a struct, got %T", ptr)
	}
	st := rv.Elem()
	si := structFields(st.Type())
	for k, uv := range update.All() {
		i, ok := si.byName[k]
		if !ok {
			return NewValidationError(modelName(st.Type()), []any{k}, "Extra inputs are not permitted", "extra_forbidden", uv)
		}
		fv := st.FieldByIndex(si.fields[i].index)
		if err := mergeField(fv, uv, []any{k}); err != nil {
			if ve, ok := err.(*ValidationError); ok && ve.Model == "" {
				ve.Model = modelName(st.Type())
			}
			return fmt.Errorf("pyjson: merge %q: %w", k, err)
		}
	}
	return nil
}

// recordSetter is implemented by *Map[V] and *Table[V]: validate a generic
// value into a record of type V and store it.
type recordSetter interface {
	mapLike
	setValidated(k string, v any, path []any) error
}

func (m *Map[V]) setValidated(k string, v any, path []any) error {
	var dst V
	if err := fromValue(v, &dst, path); err != nil {
		return err
	}
	m.Set(k, dst)
	return nil
}

func (t *Table[V]) setValidated(k string, v any, path []any) error {
	var dst V
	if err := fromValue(v, &dst, path); err != nil {
		return err
	}
	t.Set(k, dst)
	return nil
}

var recordSetterType = reflect.TypeFor[recordSetter]()

func mergeField(fv reflect.Value, uv any, path []any) error {
	uo, isObj := uv.(*Object)
	if isObj && reflect.PointerTo(fv.Type()).Implements(recordSetterType) {
		rs := fv.Addr().Interface().(recordSetter)
		for k, rv := range uo.All() {
			p := append(append([]any{}, path...), k)
			cur, ok := rs.pyGet(k)
			merged := DeepCopy(rv)
			if ok {
				cv, err := ToValue(cur)
				if err != nil {
					return err
				}
				merged = MergeValue(cv, rv)
			}
			if err := rs.setValidated(k, merged, p); err != nil {
				return err
			}
		}
		return nil
	}
	cur, err := ToValue(fv.Interface())
	if err != nil {
		return err
	}
	var errs []LineError
	if err := fromValueRV(MergeValue(cur, uv), fv, path, &errs); err != nil {
		return err
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}
