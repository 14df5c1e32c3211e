// Package deploytest checks what deploy/ ships against the real binaries and
// the real tools an operator runs: systemd-analyze on the units, promtool on
// the monitoring rules, the binaries' own --print-config on the example
// configs, and graceful shutdown (SIGTERM mid-stream) of the real processes.
//
// The binaries are built and started with lib/proc, the process harness
// tau2-run uses too, so a test starts and stops them as the runner and
// systemd do (SIGTERM, then a deadline). The package's non-test code is the
// PromQL metric-name reader the monitoring tests share (metricnames.go).
package deploytest
