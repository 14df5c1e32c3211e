//go:build cgo

// Command tau2-query runs SQL over a tau2rl Parquet dataset (an archive or a release) with the
// DuckDB engine linked in (github.com/duckdb/duckdb-go), so the README's queries and tau2-run's
// summary need no DuckDB installation. It is a separate binary because the engine is a large cgo
// library (about 70 MB): the other binaries stay small and pure Go.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2"

	"tau2rl/cmd/internal/cli"
	"tau2rl/lib/required"
)

const usage = `tau2-query — SQL over a tau2rl Parquet dataset, with DuckDB linked in (no install needed)

The dataset (an archiver's dataset_dir, a release, or a tau2-run's run/<time>/dataset) is the view
trajectories = read_parquet('DATASET/**/*.parquet', hive_partitioning = true); docs/SCHEMA.md
documents its columns. The word ARCHIVE in the SQL is replaced by DATASET, so the README's queries
run as printed. Without sql, it prints the mean reward per domain and policy version.

Examples:
  tau2-query dataset=run/20261127-173003/dataset
  tau2-query dataset=/var/lib/tau2rl/archive sql="SELECT task_id, count(*) FROM trajectories GROUP BY ALL ORDER BY 2 DESC LIMIT 5"
  make query DATASET=run/20261127-173003/dataset`

// DefaultSQL is what tau2-query runs without sql=, and what tau2-run's summary suggests.
const DefaultSQL = `SELECT domain, policy_version_start, count(*) AS n, round(avg(reward), 3) AS mean_reward
FROM trajectories WHERE status = 'ok' GROUP BY ALL ORDER BY ALL`

// Config is tau2-query's configuration.
type Config struct {
	// Dataset is the Parquet dataset's root directory. Required.
	Dataset string `yaml:"dataset"`
	// SQL is the query; "" runs DefaultSQL.
	SQL string `yaml:"sql"`
}

// Validate requires the dataset.
func (c *Config) Validate() error {
	if c.Dataset == "" {
		return fmt.Errorf("dataset (the Parquet dataset's directory) is %w", required.ErrMissing)
	}
	return nil
}

func main() {
	var cfg Config
	cli.Main(cli.App{Name: "tau2-query", Usage: usage, MetricsAddr: "off"}, &cfg, func(ctx context.Context, _ *cli.Runtime) error {
		return query(ctx, &cfg, os.Stdout)
	})
}

// query runs cfg's SQL over the dataset and writes the result as an aligned table.
func query(ctx context.Context, cfg *Config, w io.Writer) error {
	files, err := filepath.Glob(filepath.Join(cfg.Dataset, "*"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("%w: dataset %s: no such directory, or empty", cli.ErrUsage, cfg.Dataset)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("duckdb: %w", err)
	}
	defer db.Close()
	glob := strings.ReplaceAll(filepath.Join(cfg.Dataset, "**", "*.parquet"), "'", "''")
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE VIEW trajectories AS SELECT * FROM read_parquet('%s', hive_partitioning = true)", glob)); err != nil {
		return fmt.Errorf("dataset %s: %w", cfg.Dataset, err)
	}
	q := cfg.SQL
	if strings.TrimSpace(q) == "" {
		q = DefaultSQL
	}
	q = strings.ReplaceAll(q, "ARCHIVE", strings.ReplaceAll(cfg.Dataset, "'", "''"))
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("%w: query: %w", cli.ErrUsage, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	table := [][]string{cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("query: %w", err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = format(v)
		}
		table = append(table, row)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	writeTable(w, table)
	fmt.Fprintf(w, "(%d rows)\n", len(table)-1)
	return nil
}

// format prints a value as DuckDB's CLI would, roughly: NULL, numbers in their shortest form,
// bytes as text.
func format(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(x)
	case float64:
		return fmt.Sprintf("%.6g", x)
	case float32:
		return fmt.Sprintf("%.6g", x)
	default:
		return fmt.Sprint(x)
	}
}

// writeTable aligns the columns (the first row is the header).
func writeTable(w io.Writer, table [][]string) {
	widths := make([]int, len(table[0]))
	for _, r := range table {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for n, r := range table {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		if n == 0 {
			var sep []string
			for _, wd := range widths {
				sep = append(sep, strings.Repeat("-", wd))
			}
			fmt.Fprintln(w, strings.Join(sep, "  "))
		}
	}
}
