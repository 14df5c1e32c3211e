package env

import (
	"fmt"

	"tau2rl/tau2/pyjson"
)

// Schemas indexes a JSON list of OpenAI tool schemas (as embedded by a
// domain package) by function name; each schema is re-encoded in
// json.dumps form, ready for Tool.Schema.
type Schemas map[string]string

// ParseSchemas parses a JSON list of {"type": "function", "function":
// {"name": ...}} objects.
func ParseSchemas(text string) (Schemas, error) {
	v, err := pyjson.Loads(text)
	if err != nil {
		return nil, fmt.Errorf("env: schemas: %w", err)
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("env: schemas: expected a list, got %s", pyjson.TypeName(v))
	}
	out := make(Schemas, len(l))
	for i, s := range l {
		o, ok := s.(*pyjson.Object)
		if !ok {
			return nil, fmt.Errorf("env: schemas[%d]: not an object", i)
		}
		fn, _ := o.Get("function")
		fo, ok := fn.(*pyjson.Object)
		if !ok {
			return nil, fmt.Errorf("env: schemas[%d]: no function object", i)
		}
		name, _ := fo.Get("name")
		n, ok := name.(string)
		if !ok {
			return nil, fmt.Errorf("env: schemas[%d]: no function name", i)
		}
		enc, err := pyjson.Dumps(o)
		if err != nil {
			return nil, fmt.Errorf("env: schemas[%d]: %w", i, err)
		}
		out[n] = enc
	}
	return out, nil
}

// MustParseSchemas is ParseSchemas for embedded package data; it panics on
// error (caught by any test of the domain package).
func MustParseSchemas(text string) Schemas {
	s, err := ParseSchemas(text)
	if err != nil {
		panic(err)
	}
	return s
}

// Get returns the schema of the named tool; it panics when missing, since
// tools are declared at package level against an embedded schema file.
func (s Schemas) Get(name string) string {
	v, ok := s[name]
	if !ok {
		panic("env: no schema for tool " + name)
	}
	return v
}
