package release

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"tau2rl/schemas"
	"tau2rl/schemas/manifest"
)

// Card renders the dataset card (README.md) of a release: what it is, how it
// was selected, its partitions, files and source offsets, and a table of
// every column with its Parquet type and meaning (from the schemas doc
// comments, see columns_gen.go).
func Card(m *manifest.Manifest) ([]byte, error) {
	types := columnTypes(schemas.ParquetSchema)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", m.Name)
	if m.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", m.Description)
	}
	fmt.Fprintf(&b, "Scored τ²-bench agent trajectories (tool-using customer-service episodes with the token-level record of every policy LLM call), released from a tau2rl archive.\n\n")
	fmt.Fprintf(&b, "- Rows: %d (%d duplicate trajectory ids dropped)\n", m.Rows, m.DuplicatesDropped)
	fmt.Fprintf(&b, "- Files: %d Parquet files, zstd, Hive partitions `domain=<d>/date=<YYYY-MM-DD>/`\n", len(m.Files))
	fmt.Fprintf(&b, "- Schema version: %s (readers of major %d accept any minor; see the version rules in docs/SCHEMA.md)\n", m.SchemaVersion, schemas.SchemaMajor)
	fmt.Fprintf(&b, "- Created: %s from `%s`\n", m.Created.Format("2006-01-02T15:04:05Z"), m.Source)
	sel, err := json.Marshal(m.Filters)
	if err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	fmt.Fprintf(&b, "- Selection: `%s`\n\n", sel)
	fmt.Fprintf(&b, "Every file's SHA-256 is in manifest.json. Rows with status `infra_error` record infrastructure failures, not rewards; never train on them.\n\n")

	b.WriteString("## Query with DuckDB\n\n```sql\n")
	b.WriteString("SELECT domain, policy_version_start, count(*) AS n, avg(reward) AS mean_reward\n")
	b.WriteString("FROM read_parquet('**/*.parquet', hive_partitioning = true)\nWHERE status = 'ok'\nGROUP BY ALL ORDER BY ALL;\n```\n\n")

	b.WriteString("## Partitions\n\n| partition | rows | files |\n|---|---:|---:|\n")
	for _, p := range m.Partitions {
		fmt.Fprintf(&b, "| `%s` | %d | %d |\n", p.Path, p.Rows, p.Files)
	}
	b.WriteString("\n## Files\n\n| file | rows | bytes | sha256 | mode |\n|---|---:|---:|---|---|\n")
	for _, f := range m.Files {
		fmt.Fprintf(&b, "| `%s` | %d | %d | `%s` | %s |\n", f.Path, f.Rows, f.Bytes, f.SHA256, f.Mode)
	}
	if len(m.KafkaOffsets) > 0 {
		b.WriteString("\n## Source Kafka offsets\n\nOffset ranges of the archived messages the release draws from (per topic partition; not every offset in a range is in the release).\n\n| topic | partition | first | last | messages |\n|---|---:|---:|---:|---:|\n")
		for _, o := range m.KafkaOffsets {
			fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d |\n", o.Topic, o.Partition, o.First, o.Last, o.Messages)
		}
	}
	b.WriteString("\n## Columns\n\nNested columns are written `parent.child` (the child of a list of structs is a field of each element).\n\n| column | type | description |\n|---|---|---|\n")
	for _, c := range columnDocs {
		t, ok := types[c.Path]
		if !ok {
			return nil, fmt.Errorf("card: column %s is documented but not in the Parquet schema (regenerate with go generate)", c.Path)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.Path, t, strings.ReplaceAll(c.Doc, "|", `\|`))
	}
	return []byte(b.String()), nil
}

// columnTypes maps every column path (as in columnDocs: list elements are
// not named) to a readable type.
func columnTypes(s *parquet.Schema) map[string]string {
	out := map[string]string{}
	var walk func(n parquet.Node, path string)
	walk = func(n parquet.Node, path string) {
		for _, f := range n.Fields() {
			p := f.Name()
			if path != "" {
				p = path + "." + f.Name()
			}
			t, elem := describe(f)
			out[p] = t
			if elem != nil && !elem.Leaf() {
				walk(elem, p)
			}
		}
	}
	walk(s, "")
	return out
}

// describe returns a readable type of n and, for lists and structs, the
// node whose fields are the nested columns.
func describe(n parquet.Node) (string, parquet.Node) {
	opt := ""
	if n.Optional() {
		opt = ", nullable"
	}
	var lv format.LogicalTypeValue
	if lt := n.Type().LogicalType(); lt != nil {
		lv = lt.Value
	}
	_, isList := lv.(*format.ListType)
	_, isMap := lv.(*format.MapType)
	switch {
	case isList:
		elem := n.Fields()[0].Fields()[0]
		et, _ := describe(elem)
		et = strings.TrimSuffix(et, ", nullable")
		return "list<" + et + ">" + opt, elem
	case isMap:
		return "map<string, string>" + opt, nil
	case n.Leaf():
		return leafType(n) + opt, nil
	default:
		return "struct" + opt, n
	}
}

func leafType(n parquet.Node) string {
	if lt := n.Type().LogicalType(); lt != nil {
		switch lt.Value.(type) {
		case *format.StringType:
			return "string"
		case *format.TimestampType:
			return "timestamp (µs, UTC)"
		}
	}
	switch n.Type().Kind() {
	case parquet.Boolean:
		return "boolean"
	case parquet.Int32:
		return "int32"
	case parquet.Int64:
		return "int64"
	case parquet.Float:
		return "float32"
	case parquet.Double:
		return "float64"
	case parquet.ByteArray:
		return "binary"
	}
	return n.Type().String()
}
