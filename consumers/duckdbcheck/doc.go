// Package duckdbcheck holds the tests that query the Parquet archive with DuckDB (through the
// github.com/duckdb/duckdb-go/v2 driver), proving that files written by schemas.NewParquetWriter
// are readable by an independent engine and that the queries documented in docs/SCHEMA.md return
// what the Go code computes. It is separate so that only these tests pay DuckDB's cgo build cost.
package duckdbcheck

// Queries documented in docs/SCHEMA.md; %s is replaced by the dataset glob
// ('<root>/**/*.parquet'). They are constants so the tests run exactly the documented text.
const (
	QueryCount = `SELECT count(*) AS trajectories, count(*) FILTER (WHERE status = 'ok') AS ok
FROM read_parquet('%s', hive_partitioning = true)`

	QueryRewardByDomainVersion = `SELECT domain, policy_version_start, count(*) AS n, avg(reward) AS mean_reward
FROM read_parquet('%s', hive_partitioning = true)
WHERE status = 'ok'
GROUP BY domain, policy_version_start
ORDER BY domain, policy_version_start`

	QueryMessagesByRole = `SELECT m.role, count(*) AS messages
FROM (SELECT unnest(messages) AS m FROM read_parquet('%s', hive_partitioning = true))
GROUP BY m.role
ORDER BY m.role`

	QueryToolCalls = `SELECT tc.name, count(*) AS calls
FROM (SELECT unnest(m.tool_calls) AS tc
      FROM (SELECT unnest(messages) AS m FROM read_parquet('%s', hive_partitioning = true)))
GROUP BY tc.name
ORDER BY tc.name`

	QueryTokens = `SELECT count(*) AS llm_calls,
       sum(len(c.completion_tokens)) AS generated_tokens,
       sum(len(c.prompt_tokens)) AS stored_prompt_tokens,
       sum(c.prompt_shared + len(c.prompt_tokens)) AS full_prompt_tokens
FROM (SELECT unnest(calls) AS c FROM read_parquet('%s', hive_partitioning = true))`

	QueryPerDay = `SELECT date, domain, count(*) AS n
FROM read_parquet('%s', hive_partitioning = true)
GROUP BY date, domain
ORDER BY date, domain`

	QuerySuccessPerTask = `SELECT task_id, count(*) AS trials, sum(CASE WHEN reward >= 1 - 1e-6 THEN 1 ELSE 0 END) AS successes
FROM read_parquet('%s', hive_partitioning = true)
WHERE status = 'ok'
GROUP BY task_id
ORDER BY task_id`

	QueryVersionMetadata = `SELECT DISTINCT decode(value) AS schema_version
FROM parquet_kv_metadata('%s')
WHERE decode(key) = 'tau2rl.schema_version'`
)
