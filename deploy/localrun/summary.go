package localrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

// summary reads back what the run left on disk — the Parquet dataset and the
// trainer's checkpoints — and prints what happened. It reads the files rather
// than trusting the processes' counters, so it shows what a user would find.
func (p *pipeline) summary(ctx context.Context, elapsed time.Duration) error {
	ds, err := dataset.Open(p.dataset)
	if err != nil {
		return fmt.Errorf("summary: %w (archiver log: %s)", err, p.archiver.LogPath)
	}
	type agg struct {
		n, rewardSum, tokens float64
	}
	byDomain := map[string]*agg{}
	byVersion := map[int64]*agg{}
	terminations := map[string]int{}
	n := 0
	// The scan yields each id once and counts the other copies in st.Duplicates.
	st, err := ds.Scan(ctx, dataset.Filter{IncludeInfraErrors: true}, func(t *schemas.Trajectory) error {
		n++
		terminations[string(t.Status)+"/"+t.Termination]++
		if t.Status != schemas.StatusOK {
			return nil
		}
		gen := 0
		for _, c := range t.Calls {
			gen += len(c.CompletionTokens)
		}
		for _, a := range []*agg{get(byDomain, t.Domain), get(byVersion, t.PolicyVersionStart)} {
			a.n++
			a.rewardSum += t.Reward
			a.tokens += float64(gen)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("summary: read dataset: %w", err)
	}
	fmt.Fprintf(p.out, "\n== tau2-run summary (%s) ==\n", elapsed.Round(time.Second))
	fmt.Fprintf(p.out, "dataset %s: %d files, %d trajectories, %d duplicate ids\n", p.dataset, st.Files, n, st.Duplicates)
	fmt.Fprintln(p.out, "reward by domain:")
	for _, d := range sortedKeys(byDomain) {
		a := byDomain[d]
		fmt.Fprintf(p.out, "  %-10s %5.0f episodes  mean reward %.3f  %7.0f generated tokens\n", d, a.n, a.rewardSum/a.n, a.tokens)
	}
	fmt.Fprintln(p.out, "reward by policy version at episode start:")
	vs := make([]int64, 0, len(byVersion))
	for v := range byVersion {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	for _, v := range vs {
		a := byVersion[v]
		fmt.Fprintf(p.out, "  v%-3d %5.0f episodes  mean reward %.3f\n", v, a.n, a.rewardSum/a.n)
	}
	fmt.Fprintln(p.out, "status/termination:")
	infra := 0
	for _, k := range sortedKeys(terminations) {
		fmt.Fprintf(p.out, "  %-32s %d\n", k, terminations[k])
		if strings.HasPrefix(k, string(schemas.StatusInfraError)+"/") {
			infra += terminations[k]
		}
	}
	if infra > 0 {
		fmt.Fprintf(p.out, "  (%d infrastructure errors: episodes the producer could not run or grade — never rewards, never trained on;\n"+
			"   each is logged in %s as \"episode infrastructure error\" with its stage and cause)\n", infra, filepath.Join(p.dir, "producer.log"))
	}
	ckpts, _ := filepath.Glob(filepath.Join(p.checkpoints, "v*"))
	var names []string
	for _, c := range ckpts {
		if fi, err := os.Stat(c); err == nil && fi.IsDir() {
			names = append(names, filepath.Base(c))
		}
	}
	fmt.Fprintf(p.out, "trainer checkpoints in %s: %s\n", p.checkpoints, strings.Join(names, " "))
	fmt.Fprintln(p.out, queryHint(p.bin("tau2-query"), p.dataset))
	if st.Duplicates > 0 {
		return fmt.Errorf("summary: %d duplicate trajectory ids in the dataset", st.Duplicates)
	}
	if n == 0 {
		return fmt.Errorf("summary: the dataset is empty; see %s", p.logHint())
	}
	return nil
}

func get[K comparable, V any](m map[K]*V, k K) *V {
	if v, ok := m[k]; ok {
		return v
	}
	v := new(V)
	m[k] = v
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// queryHint is the summary's last line: how to query the dataset. tau2-query (built by make build
// beside the other binaries) links DuckDB, so nothing needs installing; DuckDB's own CLI runs the
// same SQL on the same files for those who have it.
func queryHint(tau2Query, dataset string) string {
	return fmt.Sprintf("query it (README.md has more queries; no DuckDB install needed): %s dataset=%s\n"+
		"  or with DuckDB's CLI, if installed: duckdb -c \"SELECT domain, policy_version_start, count(*), avg(reward) FROM read_parquet('%s/**/*.parquet', hive_partitioning=true) GROUP BY ALL\"",
		tau2Query, dataset, dataset)
}
