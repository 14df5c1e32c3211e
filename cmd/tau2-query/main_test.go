//go:build cgo

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/trainer/trajtest"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
)

// writeDataset writes two tasks × four trajectories (rewards 1, 0, 1, 0) as the archiver lays
// them out (Hive partitions by domain).
func writeDataset(t *testing.T) string {
	t.Helper()
	var all []*schemas.Trajectory
	for i, task := range []string{"0", "1"} {
		g, err := trajtest.Group(trajtest.Default(), task, uint64(i+1), []float64{1, 0, 1, 0})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, g...)
	}
	dir := t.TempDir()
	if err := dataset.WriteFile(filepath.Join(dir, "domain=airline", "part-0.parquet"), all, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestQuery (issue 27 item 17): the summary's query runs without a DuckDB installation — the
// default query, a README query written with ARCHIVE, and errors that say what is wrong.
func TestQuery(t *testing.T) {
	dir := writeDataset(t)
	for _, c := range []struct {
		name, sql string
		want      []string
	}{
		{"default", "", []string{"domain   policy_version_start  n  mean_reward", "airline  0                     8  0.5", "(1 rows)"}},
		{"README query with ARCHIVE", "SELECT count(*) AS n FROM read_parquet('ARCHIVE/**/*.parquet', hive_partitioning = true)", []string{"n\n-\n8\n(1 rows)"}},
		{"the view", "SELECT task_id, sum(reward) AS s FROM trajectories GROUP BY ALL ORDER BY ALL", []string{"0        2", "1        2", "(2 rows)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			if err := query(context.Background(), &Config{Dataset: dir, SQL: c.sql}, &b); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
	var b strings.Builder
	if err := query(context.Background(), &Config{Dataset: dir, SQL: "SELECT nope FROM trajectories"}, &b); cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a bad query: exit %d: %v", cli.ExitCode(err), err)
	}
	if err := query(context.Background(), &Config{Dataset: filepath.Join(dir, "missing")}, &b); cli.ExitCode(err) != 2 {
		t.Errorf("a missing dataset: exit %d: %v", cli.ExitCode(err), err)
	}
	clitest.PrintConfigAlone(t, &Config{}, "dataset (the Parquet dataset's directory) is required")
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { return &Config{} })
}
