package env

import (
	"fmt"
	"math"
	"reflect"

	"tau2rl/tau2/pyjson"
)

// Args are the decoded keyword arguments of one call. Presence and
// unexpected names are checked before the tool runs (Python's binding
// rules); the typed getters check JSON types. τ² itself never validates
// arguments against the schema — Python fails (or silently works) wherever
// the value is first used. The Go rule, applied uniformly: a getter whose
// argument has the wrong JSON type records an error and the call fails with
// "Error: <tool>: argument '<name>' must be <type>, not <type>". The first
// error wins; tools check Err() before touching the DB.
type Args struct {
	tool string
	obj  *pyjson.Object
	err  error
}

// NewArgs wraps decoded arguments for the named tool (nil means none).
func NewArgs(tool string, obj *pyjson.Object) *Args {
	if obj == nil {
		obj = &pyjson.Object{}
	}
	return &Args{tool: tool, obj: obj}
}

// Object returns the underlying arguments.
func (a *Args) Object() *pyjson.Object { return a.obj }

// Err returns the first argument error.
func (a *Args) Err() error { return a.err }

// Fail records err (if none is recorded yet) and returns it.
func (a *Args) Fail(err error) error {
	if a.err == nil {
		a.err = err
	}
	return a.err
}

// Has reports whether the argument was passed.
func (a *Args) Has(name string) bool { return a.obj.Has(name) }

// Raw returns the argument's generic value (nil when absent).
func (a *Args) Raw(name string) any {
	v, _ := a.obj.Get(name)
	return v
}

func (a *Args) typeErr(name, want string, v any) {
	a.Fail(fmt.Errorf("%s: argument '%s' must be %s, not %s", a.tool, name, want, pyjson.TypeName(v)))
}

// Str returns a str argument.
func (a *Args) Str(name string) string {
	v := a.Raw(name)
	s, ok := v.(string)
	if !ok {
		a.typeErr(name, "str", v)
	}
	return s
}

// OptStr returns a str-or-None argument with a default when absent; ok is
// false when the value is None (or absent with a nil default).
func (a *Args) OptStr(name string, def *string) *string {
	v, present := a.obj.Get(name)
	if !present {
		return def
	}
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		a.typeErr(name, "str", v)
		return nil
	}
	return &s
}

// Int returns an int argument. An integral float (2.0) is accepted as its
// int value (pydantic's lax int); fractions, bools and strings are errors.
func (a *Args) Int(name string) int64 {
	v := a.Raw(name)
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) && math.Abs(x) < 1<<62 {
			return int64(x)
		}
	}
	a.typeErr(name, "int", v)
	return 0
}

// Number returns an int or float argument as its generic value (int64 or
// float64), for tools whose output echoes the number as Python prints it.
func (a *Args) Number(name string) any {
	v := a.Raw(name)
	switch v.(type) {
	case int64, float64:
		return v
	}
	a.typeErr(name, "a number", v)
	return int64(0)
}

// Float returns an int or float argument as float64.
func (a *Args) Float(name string) float64 {
	switch x := a.Number(name).(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// Bool returns a bool argument.
func (a *Args) Bool(name string) bool {
	v := a.Raw(name)
	b, ok := v.(bool)
	if !ok {
		a.typeErr(name, "bool", v)
	}
	return b
}

// List returns a list argument.
func (a *Args) List(name string) []any {
	v := a.Raw(name)
	l, ok := v.([]any)
	if !ok {
		a.typeErr(name, "list", v)
	}
	return l
}

// Dict returns a dict argument.
func (a *Args) Dict(name string) *pyjson.Object {
	v := a.Raw(name)
	o, ok := v.(*pyjson.Object)
	if !ok {
		a.typeErr(name, "dict", v)
	}
	return o
}

// Model validates a dict argument into out (a pointer to a model struct),
// like constructing a pydantic model from the dict inside the tool; the
// error is pydantic's ValidationError text.
func (a *Args) Model(name string, out any) {
	if a.err != nil {
		return
	}
	if err := pyjson.FromValue(a.Raw(name), out); err != nil {
		a.Fail(err)
	}
}

// Models validates a list-of-dicts argument into out (a pointer to a slice of
// models); each element is validated like Model(**item) in Python, so the
// error names the element model (not the list).
func (a *Args) Models(name string, out any) {
	l := a.List(name)
	if a.err != nil {
		return
	}
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Slice {
		a.Fail(fmt.Errorf("%s: Models needs a pointer to a slice, got %T", a.tool, out))
		return
	}
	s := reflect.MakeSlice(rv.Elem().Type(), len(l), len(l))
	for i, el := range l {
		if _, ok := el.(*pyjson.Object); !ok {
			a.Fail(fmt.Errorf("%s: argument '%s' item %d must be dict, not %s", a.tool, name, i, pyjson.TypeName(el)))
			return
		}
		if err := pyjson.FromValue(el, s.Index(i).Addr().Interface()); err != nil {
			a.Fail(err)
			return
		}
	}
	rv.Elem().Set(s)
}
