package banking_knowledge

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

// matchOp is _get_comparison_op(op)(actual, expected); ok=false where the
// Python comparison raises (the record then does not match).
func matchOp(op string, a, b any) (bool, bool) {
	switch op {
	case "ne":
		return !pyEq(a, b), true
	case "gt", "gte", "lt", "lte":
		c, ok := pyCompare(a, b)
		if !ok {
			return false, false
		}
		switch op {
		case "gt":
			return c > 0, true
		case "gte":
			return c >= 0, true
		case "lt":
			return c < 0, true
		}
		return c <= 0, true
	case "contains":
		if a == nil {
			return false, true
		}
		return pyIn(b, a)
	case "startswith":
		if a == nil {
			return false, true
		}
		return strings.HasPrefix(pyStr(a), pyStr(b)), true
	case "endswith":
		if a == nil {
			return false, true
		}
		return strings.HasSuffix(pyStr(a), pyStr(b)), true
	case "in":
		return pyIn(a, b)
	case "nin":
		in, ok := pyIn(a, b)
		return !in, ok
	}
	return pyEq(a, b), true // "eq" and any unknown operator
}

// recordMatches is _record_matches.
func recordMatches(rec *pyjson.Object, constraints *pyjson.Object) bool {
	for key, want := range constraints.All() {
		field, op := key, "eq"
		if i := strings.LastIndex(key, "__"); i >= 0 {
			field, op = key[:i], key[i+2:]
		}
		actual, _ := rec.Get(field)
		ok, valid := matchOp(op, actual, want)
		if !valid || !ok {
			return false
		}
	}
	return true
}

type idRecord struct {
	id  string
	rec *pyjson.Object
}

// queryDB is query_db(..., return_ids=True, **constraints) over a known table.
func (db *DB) queryDB(table string, constraints *pyjson.Object) []idRecord {
	t := db.table(table)
	if t == nil {
		return nil
	}
	var out []idRecord
	for id, rec := range t.Data.All() {
		if recordMatches(rec, constraints) {
			out = append(out, idRecord{id, rec})
		}
	}
	return out
}

// where builds a constraints object from alternating keys and values.
func where(kv ...any) *pyjson.Object { return pyjson.NewObject(kv...) }

// formatRecords is query_database_tool's listing of matches.
func formatRecords(table string, recs []idRecord) string {
	lines := []string{fmt.Sprintf("Found %d record(s) in '%s':\n", len(recs), table)}
	for i, r := range recs {
		lines = append(lines, fmt.Sprintf("%d. Record ID: %s", i+1, r.id))
		for k, v := range r.rec.All() {
			lines = append(lines, "   "+k+": "+pyStr(v))
		}
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// pyListRepr is repr() of a list of str.
func pyListRepr(l []string) string {
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = pyjson.Repr(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// queryTool is query_database_tool(database_name, constraints): the
// constraints are a JSON text (upstream builds it with an f-string, so an
// id holding a quote makes it invalid JSON, reported as Python's
// JSONDecodeError text).
func (db *DB) queryTool(table, constraints string) string {
	if db.table(table) == nil || !isQueryable(table) {
		return fmt.Sprintf("Error: Database '%s' not found. Available: %s", table, pyListRepr(tableNames))
	}
	var c *pyjson.Object
	if constraints == "" {
		c = pyjson.NewObject()
	} else {
		v, err := pyjson.Loads(constraints)
		if err != nil {
			return "Error: Invalid JSON: " + err.Error()
		}
		o, ok := v.(*pyjson.Object)
		if !ok {
			return "Error querying database: tau2.domains.banking_knowledge.db_query.query_db() argument after ** must be a mapping, not " + pyjson.TypeName(v)
		}
		if o.Has("db_name") {
			return "Error querying database: query_db() got multiple values for argument 'db_name'"
		}
		for _, k := range []string{"db", "return_ids"} {
			if o.Has(k) {
				return "Error querying database: tau2.domains.banking_knowledge.db_query.query_db() got multiple values for keyword argument '" + k + "'"
			}
		}
		c = o
	}
	limit, hasLimit := c.Get("limit")
	if hasLimit {
		c = c.Clone()
		c.Delete("limit")
	}
	recs := db.queryDB(table, c)
	if hasLimit && limit != nil && len(recs) > 0 {
		n, ok := num(limit)
		if !ok {
			return "Error querying database: '>=' not supported between instances of 'int' and '" + pyjson.TypeName(limit) + "'"
		}
		// results stop growing once len(results) >= limit
		k := 1
		for k < len(recs) && !(float64(k) >= n) {
			k++
		}
		recs = recs[:k]
	}
	if len(recs) == 0 {
		return fmt.Sprintf("No records found in '%s'.", table)
	}
	return formatRecords(table, recs)
}

func isQueryable(table string) bool {
	for _, n := range tableNames {
		if n == table {
			return true
		}
	}
	return false
}

// byField renders upstream's f'{{"user_id": "{s}"}}' text.
func byField(field, value string) string {
	return `{"` + field + `": "` + value + `"}`
}
