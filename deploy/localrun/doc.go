// Package localrun runs the tau2rl binaries together on one machine, each its own process
// (lib/proc), as production runs them under systemd: the pipeline of `tau2-run` (tau2-broker,
// tau2-scripted-llm, the archiver, the trainer and the producer until the trainer has taken its
// steps, then a summary read back from the Parquet dataset) and the learning experiment of
// `tau2-run experiment` (demonstrations → SFT → evaluation → GRPO → evaluation → report.md,
// report.json and figures; docs/LEARNING.md). cmd/tau2-run parses the flags and calls it; its
// tests and this package's share the code. It lives under deploy/ because it is a deployment of
// the binaries — one machine, loopback addresses, an embedded broker — and drives them only from
// outside, through their command lines, health and metrics endpoints, logs and files.
package localrun
