package duckdbcheck

import (
	"database/sql"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

func fixture(t *testing.T) (string, []*schemas.Trajectory) {
	t.Helper()
	rng := rand.New(rand.NewPCG(31, 32))
	var all []*schemas.Trajectory
	for i := 0; i < 40; i++ {
		o := schemas.DefaultSyntheticOptions()
		o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens, o.Tasks = 6, 512, 32, 8, 6
		o.Domain = []string{"airline", "retail", "telecom"}[i%3]
		o.PolicyVersion = int64(i % 3)
		o.Start = time.Date(2026, 5, 1+(i/3)%2, 8, 0, 0, 0, time.UTC)
		all = append(all, schemas.Synthetic(rng, o))
	}
	all[7].Status, all[7].Error = schemas.StatusInfraError, "policy server: connection refused"
	root := t.TempDir()
	if _, err := dataset.WritePartitioned(root, "part-0", all[:20], schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.WritePartitioned(root, "part-1", all[20:], schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "**", "*.parquet"), all
}

func open(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func query(t *testing.T, db *sql.DB, q, glob string) [][]any {
	t.Helper()
	rows, err := db.Query(fmt.Sprintf(q, glob))
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func num(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	case *big.Int: // sum() of integers is HUGEINT
		f, _ := new(big.Float).SetInt(x).Float64()
		return f
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func TestDuckDBQueries(t *testing.T) {
	glob, all := fixture(t)
	db := open(t)

	var ok []*schemas.Trajectory
	for _, tr := range all {
		if tr.Status == schemas.StatusOK {
			ok = append(ok, tr)
		}
	}

	t.Run("count", func(t *testing.T) {
		r := query(t, db, QueryCount, glob)
		if num(r[0][0]) != float64(len(all)) || num(r[0][1]) != float64(len(ok)) {
			t.Fatalf("count %v, want %d/%d", r, len(all), len(ok))
		}
	})

	t.Run("reward by domain and version", func(t *testing.T) {
		type key struct {
			d string
			v int64
		}
		sum, n := map[key]float64{}, map[key]int{}
		for _, tr := range ok {
			k := key{tr.Domain, tr.PolicyVersionStart}
			sum[k] += tr.Reward
			n[k]++
		}
		r := query(t, db, QueryRewardByDomainVersion, glob)
		if len(r) != len(n) {
			t.Fatalf("%d groups, want %d", len(r), len(n))
		}
		for _, row := range r {
			k := key{row[0].(string), int64(num(row[1]))}
			if int(num(row[2])) != n[k] || math.Abs(num(row[3])-sum[k]/float64(n[k])) > 1e-12 {
				t.Fatalf("group %v: %v, want n=%d mean=%v", k, row, n[k], sum[k]/float64(n[k]))
			}
		}
	})

	t.Run("messages by role", func(t *testing.T) {
		want := map[string]int{}
		for _, tr := range all {
			for _, m := range tr.Messages {
				want[string(m.Role)]++
			}
		}
		got := map[string]int{}
		for _, row := range query(t, db, QueryMessagesByRole, glob) {
			got[row[0].(string)] = int(num(row[1]))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("roles %v, want %v", got, want)
		}
	})

	t.Run("tool calls", func(t *testing.T) {
		want := map[string]int{}
		for _, tr := range all {
			for _, m := range tr.Messages {
				for _, tc := range m.ToolCalls {
					want[tc.Name]++
				}
			}
		}
		got := map[string]int{}
		for _, row := range query(t, db, QueryToolCalls, glob) {
			got[row[0].(string)] = int(num(row[1]))
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("tool calls %v, want %v", got, want)
		}
	})

	t.Run("tokens", func(t *testing.T) {
		var calls, gen, stored, full int
		for _, tr := range all {
			for i := range tr.Calls {
				calls++
				gen += len(tr.Calls[i].CompletionTokens)
				stored += len(tr.Calls[i].PromptTokens)
				full += tr.PromptLen(i)
			}
		}
		r := query(t, db, QueryTokens, glob)[0]
		got := []int{int(num(r[0])), int(num(r[1])), int(num(r[2])), int(num(r[3]))}
		if !reflect.DeepEqual(got, []int{calls, gen, stored, full}) {
			t.Fatalf("tokens %v, want %v", got, []int{calls, gen, stored, full})
		}
		if full <= stored {
			t.Fatal("fixture has no prefix sharing")
		}
	})

	t.Run("hive partitions", func(t *testing.T) {
		want := map[string]int{}
		for _, tr := range all {
			want[tr.EndedAt.UTC().Format("2006-01-02")+"/"+tr.Domain]++
		}
		got := map[string]int{}
		for _, row := range query(t, db, QueryPerDay, glob) {
			d, ok := row[0].(time.Time)
			if !ok {
				t.Fatalf("date partition is %T, want a DATE", row[0])
			}
			got[d.Format("2006-01-02")+"/"+row[1].(string)] = int(num(row[2]))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("per day %v, want %v", got, want)
		}
	})

	t.Run("success per task", func(t *testing.T) {
		trials, succ := map[string]int{}, map[string]int{}
		for _, tr := range ok {
			trials[tr.TaskID]++
			if tr.Reward >= 1-1e-6 {
				succ[tr.TaskID]++
			}
		}
		r := query(t, db, QuerySuccessPerTask, glob)
		if len(r) != len(trials) {
			t.Fatalf("%d tasks, want %d", len(r), len(trials))
		}
		for _, row := range r {
			id := row[0].(string)
			if int(num(row[1])) != trials[id] || int(num(row[2])) != succ[id] {
				t.Fatalf("task %s: %v, want %d/%d", id, row, succ[id], trials[id])
			}
		}
	})

	t.Run("schema version metadata", func(t *testing.T) {
		r := query(t, db, QueryVersionMetadata, glob)
		if len(r) != 1 || fmt.Sprint(r[0][0]) != schemas.SchemaVersion {
			t.Fatalf("versions %v", r)
		}
	})
}

// TestDuckDBTypes pins the column types DuckDB sees, so a layout change that breaks SQL users is
// caught here (nested lists of structs, timestamps, nullable breakdown, map tags, zstd).
func TestDuckDBTypes(t *testing.T) {
	glob, all := fixture(t)
	db := open(t)
	want := map[string]string{
		"id": "VARCHAR", "task_id": "VARCHAR", "trial": "INTEGER", "seed": "BIGINT",
		"started_at": "TIMESTAMP WITH TIME ZONE", "policy_version_start": "BIGINT", "reward": "DOUBLE",
		"reward_basis": "VARCHAR[]", "tags": "MAP(VARCHAR, VARCHAR)",
		"breakdown": "STRUCT(db DOUBLE, env_assertion DOUBLE, \"action\" DOUBLE, communicate DOUBLE, nl_assertion DOUBLE)",
		"messages":  "STRUCT(\"role\" VARCHAR, \"content\" VARCHAR, reasoning VARCHAR, tool_calls STRUCT(id VARCHAR, \"name\" VARCHAR, arguments VARCHAR, requestor VARCHAR)[], tool_call_id VARCHAR, requestor VARCHAR, tool_error BOOLEAN, turn INTEGER, \"timestamp\" TIMESTAMP WITH TIME ZONE, call_index INTEGER)[]",
		"calls":     "STRUCT(prompt_ref INTEGER, prompt_shared INTEGER, prompt_tokens INTEGER[], completion_tokens INTEGER[], behavior_logprobs FLOAT[], version_runs STRUCT(\"version\" BIGINT, count INTEGER)[], loss_mask INTEGER[], shaped_reward DOUBLE, finish_reason VARCHAR, invalid_format BOOLEAN, latency_ms DOUBLE)[]",
	}
	got := map[string]string{}
	for _, row := range query(t, db, "DESCRIBE SELECT * FROM read_parquet('%s')", glob) {
		got[row[0].(string)] = row[1].(string)
	}
	for col, typ := range want {
		if got[col] != typ {
			t.Errorf("column %s: DuckDB type %q, want %q", col, got[col], typ)
		}
	}
	codecs := query(t, db, "SELECT DISTINCT compression FROM parquet_metadata('%s')", glob)
	if len(codecs) != 1 || codecs[0][0] != "ZSTD" {
		t.Errorf("codecs %v, want only ZSTD", codecs)
	}
	// Element access and null semantics: breakdown.db is NULL where not in the basis.
	r := query(t, db, "SELECT count(*) FILTER (WHERE breakdown.nl_assertion IS NULL), count(*) FILTER (WHERE breakdown.db IS NOT NULL) FROM read_parquet('%s')", glob)
	if num(r[0][0]) != float64(len(all)) || num(r[0][1]) != float64(len(all)) {
		t.Errorf("breakdown nulls %v", r)
	}
	// The first message of every synthetic trajectory is the canned greeting.
	r = query(t, db, "SELECT DISTINCT messages[1].content FROM read_parquet('%s')", glob)
	if len(r) != 1 || r[0][0] != "Hi! How can I help you today?" {
		t.Errorf("messages[1] %v", r)
	}
	ids := query(t, db, "SELECT id FROM read_parquet('%s') ORDER BY id", glob)
	var want2 []string
	for _, tr := range all {
		want2 = append(want2, tr.ID)
	}
	sort.Strings(want2)
	for i := range ids {
		if ids[i][0] != want2[i] {
			t.Fatalf("ids differ at %d", i)
		}
	}
}
