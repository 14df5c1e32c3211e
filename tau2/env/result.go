package env

import (
	"fmt"
	"reflect"

	"tau2rl/tau2/pyjson"
)

// ToJSONStr serializes a tool's return value into ToolMessage content
// exactly like τ²'s Environment.to_json_str:
//   - a string is returned verbatim (emoji and all, no escaping);
//   - otherwise json.dumps(_process(v), default=str) with Python's default
//     separators and ensure_ascii, where _process dumps models (Go structs,
//     pyjson.Marshaler) untouched — nested numbers stay numbers and None
//     fields are null — maps lists/tuples and dicts element-wise, and turns
//     ints, floats and bools that are not inside a model into str(x)
//     ("4.0", "True").
func ToJSONStr(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	p, err := process(reflect.ValueOf(v))
	if err != nil {
		return "", err
	}
	return pyjson.Dumps(p)
}

var pyMarshalerType = reflect.TypeFor[pyjson.Marshaler]()

func process(v reflect.Value) (any, error) {
	if !v.IsValid() {
		return nil, nil
	}
	// Dict-like values (*pyjson.Object, *pyjson.Map[V], *pyjson.Table[V]).
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		out := &pyjson.Object{}
		isDict, err := pyjson.RangeDict(v.Interface(), func(k string, val any) error {
			p, err := process(reflect.ValueOf(val))
			if err != nil {
				return err
			}
			out.Set(k, p)
			return nil
		})
		if isDict {
			return out, err
		}
	}
	if v.Type().Implements(pyMarshalerType) {
		return v.Interface(), nil // a model: dumped as is
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return process(v.Elem())
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		if v.Elem().Kind() == reflect.Struct {
			return v.Interface(), nil // a model
		}
		return process(v.Elem())
	case reflect.Struct:
		return v.Interface(), nil // a model
	case reflect.String:
		return v.String(), nil
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return pyjson.Str(v.Interface()), nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return []any{}, nil
		}
		out := make([]any, v.Len())
		for i := range out {
			p, err := process(v.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	}
	if v.Type().String() == "*big.Int" {
		return pyjson.Str(v.Interface()), nil
	}
	return nil, fmt.Errorf("env: Unsupported type: %s", v.Type())
}
