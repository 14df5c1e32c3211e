package schemas

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// The trajectory is described three times by hand: the Go struct (trajectory.go, the JSON form),
// the Arrow schema (arrow_schema.go, the Kafka form) and the Parquet row (parquet.go, the archive
// form). These tests make them agree: every column, in order, with its type, nesting and
// nullability, so a field added to one and forgotten in another fails here rather than in a
// round trip that happens not to set it.

// layout renders a schema tree as one line per node ("path type nullable"), the canonical form
// the three descriptions are compared in.
type layout []string

func (l *layout) add(path, typ string, nullable bool) {
	n := ""
	if nullable {
		n = " null"
	}
	*l = append(*l, path+" "+typ+n)
}

// arrowLayout walks an Arrow type.
func arrowLayout(l *layout, path string, t arrow.DataType, nullable bool) {
	switch t := t.(type) {
	case *arrow.StructType:
		l.add(path, "struct", nullable)
		for _, f := range t.Fields() {
			arrowLayout(l, path+"."+f.Name, f.Type, f.Nullable)
		}
	case *arrow.MapType:
		l.add(path, "map", nullable)
		arrowLayout(l, path+".key", t.KeyType(), false)
		// Arrow map values are nullable by construction (arrow.MapOf); Parquet's are required.
		// A Go map[string]string has no null values, so the difference is not observable.
		arrowLayout(l, path+".value", t.ItemType(), false)
	case *arrow.ListType:
		l.add(path, "list", nullable)
		arrowLayout(l, path+"[]", t.Elem(), t.ElemField().Nullable)
	case *arrow.TimestampType:
		l.add(path, "timestamp("+t.Unit.String()+","+t.TimeZone+")", nullable)
	default:
		l.add(path, t.String(), nullable)
	}
}

// parquetLayout walks a Parquet node, naming types as Arrow does.
func parquetLayout(tb testing.TB, l *layout, path string, n parquet.Node) {
	var lv format.LogicalTypeValue
	if lt := n.Type().LogicalType(); lt != nil {
		lv = lt.Value
	}
	_, isList := lv.(*format.ListType)
	_, isMap := lv.(*format.MapType)
	switch {
	case isList:
		l.add(path, "list", n.Optional())
		outer := n.Fields()
		if len(outer) != 1 || !outer[0].Repeated() || len(outer[0].Fields()) != 1 {
			tb.Fatalf("%s: LIST without the three-level layout", path)
		}
		parquetLayout(tb, l, path+"[]", outer[0].Fields()[0])
	case isMap:
		l.add(path, "map", n.Optional())
		kv := n.Fields()
		if len(kv) != 1 || !kv[0].Repeated() || len(kv[0].Fields()) != 2 {
			tb.Fatalf("%s: MAP without key_value", path)
		}
		parquetLayout(tb, l, path+".key", kv[0].Fields()[0])
		parquetLayout(tb, l, path+".value", kv[0].Fields()[1])
	case !n.Leaf():
		l.add(path, "struct", n.Optional())
		for _, f := range n.Fields() {
			parquetLayout(tb, l, path+"."+f.Name(), f)
		}
	default:
		var typ string
		switch lv := lv.(type) {
		case *format.StringType:
			typ = "utf8"
		case *format.TimestampType:
			if _, us := lv.Unit.Value.(*format.MicroSeconds); !us || !lv.IsAdjustedToUTC {
				tb.Fatalf("%s: %v, want UTC microseconds", path, lv)
			}
			typ = "timestamp(us,UTC)"
		case *format.IntType:
			typ = fmt.Sprintf("int%d", lv.BitWidth)
			if !lv.IsSigned {
				typ = "u" + typ
			}
		case nil:
			switch n.Type().Kind() {
			case parquet.Boolean:
				typ = "bool"
			case parquet.Int32:
				typ = "int32"
			case parquet.Int64:
				typ = "int64"
			case parquet.Float:
				typ = "float32"
			case parquet.Double:
				typ = "float64"
			default:
				tb.Fatalf("%s: unexpected Parquet type %v", path, n.Type())
			}
		default:
			tb.Fatalf("%s: unexpected Parquet logical type %v", path, lv)
		}
		l.add(path, typ, n.Optional())
	}
}

// knownDifferences are where the Parquet archive deliberately stores a column differently from
// Arrow (parquet.go says why): the loss mask is list<int32> because parquet-go v0.32.0 reads
// list<uint8> back empty.
var knownDifferences = map[string][2]string{
	"calls[].loss_mask[]": {"uint8", "int32"},
}

func TestArrowAndParquetLayoutsAgree(t *testing.T) {
	var a, p layout
	for _, f := range ArrowSchema.Fields() {
		arrowLayout(&a, f.Name, f.Type, f.Nullable)
	}
	for _, f := range ParquetSchema.Fields() {
		parquetLayout(t, &p, f.Name(), f)
	}
	for i, line := range a {
		path, typ, _ := strings.Cut(line, " ")
		if d, ok := knownDifferences[path]; ok && strings.HasPrefix(typ, d[0]) {
			a[i] = path + " " + d[1] + strings.TrimPrefix(typ, d[0])
		}
	}
	compareLayouts(t, "Arrow", a, "Parquet", p)
	if len(a) < 60 {
		t.Fatalf("only %d nodes walked; the walk is broken", len(a))
	}
}

// goLayout walks a Go type as the Parquet row and the trajectory struct spell it, by Go field
// name (the two structs share field names; trajectory.go's JSON names follow τ²'s spelling for
// some nested fields, e.g. the reward breakdown's "DB").
func goLayout(l *layout, path string, t reflect.Type) {
	switch {
	case t == reflect.TypeFor[time.Time]():
		l.add(path, "time", false)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		goLayout(l, path, t.Elem())
		(*l)[len(*l)-1] += " ptr"
	case reflect.Struct:
		l.add(path, "struct", false)
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() {
				goLayout(l, path+"."+f.Name, f.Type)
			}
		}
	case reflect.Slice:
		l.add(path, "list", false)
		goLayout(l, path+"[]", t.Elem())
	case reflect.Map:
		l.add(path, "map", false)
		goLayout(l, path+".key", t.Key())
		goLayout(l, path+".value", t.Elem())
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint8:
		l.add(path, "int", false) // widths differ on purpose: ToParquetRow range-checks
	default:
		l.add(path, t.Kind().String(), false)
	}
}

func TestTrajectoryAndParquetRowAgree(t *testing.T) {
	var g, p layout
	goLayout(&g, "", reflect.TypeFor[Trajectory]())
	goLayout(&p, "", reflect.TypeFor[ParquetRow]())
	for i := range p {
		// The row stores optional timestamps as *time.Time where the trajectory uses the zero
		// time for "unset".
		p[i] = strings.Replace(p[i], " time ptr", " time", 1)
	}
	compareLayouts(t, "Trajectory", g, "ParquetRow", p)
}

// The top-level JSON names of the trajectory are the column names (and so the DuckDB names).
func TestTrajectoryJSONNamesAreColumns(t *testing.T) {
	tt := reflect.TypeFor[Trajectory]()
	var names []string
	for i := range tt.NumField() {
		if f := tt.Field(i); f.IsExported() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			names = append(names, name)
		}
	}
	var cols []string
	for _, f := range ArrowSchema.Fields() {
		cols = append(cols, f.Name)
	}
	compareLayouts(t, "Trajectory JSON", names, "Arrow", cols)
	if len(cols) != numColumns {
		t.Errorf("ArrowSchema has %d columns, the encoder's index constants %d", len(cols), numColumns)
	}
}

func compareLayouts(t *testing.T, an string, a []string, bn string, b []string) {
	t.Helper()
	if d := layoutDiff(an, a, bn, b); d != "" {
		t.Fatal(d)
	}
}

// layoutDiff describes the first node where a and b differ ("" when they agree).
func layoutDiff(an string, a []string, bn string, b []string) string {
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("node %d: %s has %q, %s has %q", i, an, x, bn, y)
		}
	}
	return ""
}

// The comparison must not pass what differs: in nullability, in a missing node.
func TestLayoutDiff(t *testing.T) {
	base := []string{"x int32", "y utf8"}
	for name, other := range map[string][]string{
		"nullability": {"x int32", "y utf8 null"},
		"missing":     {"x int32"},
		"extra":       {"x int32", "y utf8", "z bool"},
		"order":       {"y utf8", "x int32"},
	} {
		if layoutDiff("a", base, "b", other) == "" {
			t.Errorf("%s: difference not reported", name)
		}
	}
	if d := layoutDiff("a", base, "b", base); d != "" {
		t.Errorf("equal layouts reported: %s", d)
	}
}
