package archiver

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/metrics"
)

// Metrics are the archiver's Prometheus series. Transport-level series
// (bytes in, consumer lag, commit latency per topic) come from
// lib/stream/kafka's Metrics on the same registry.
type Metrics struct {
	// Messages counts fetched messages by outcome: archived, duplicate
	// (every row already archived), dead_letter.
	Messages *prometheus.CounterVec
	// BytesIn counts message value bytes fetched.
	BytesIn prometheus.Counter
	// Rows counts rows written to finalized files.
	Rows prometheus.Counter
	// DuplicateRows counts rows dropped as duplicates by trajectory id.
	DuplicateRows prometheus.Counter
	// Files counts finalized (fsynced and renamed) files.
	Files prometheus.Counter
	// FileBytes counts bytes of finalized files.
	FileBytes prometheus.Counter
	// DeadLetters counts messages sent to the dead-letter topic, by reason
	// (decode, version, path, oversize).
	DeadLetters *prometheus.CounterVec
	// Errors counts failures by stage (write, finalize, commit, dead_letter).
	Errors *prometheus.CounterVec
	// OpenFiles is the number of files being written.
	OpenFiles prometheus.Gauge
	// Uncommitted is the number of fetched messages whose offsets are not
	// committable yet.
	Uncommitted prometheus.Gauge
	// CommitLatency is the duration of one offset commit of durable progress.
	CommitLatency prometheus.Histogram
	// FinalizeLatency is the duration of footer + fsync + rename + dir fsync.
	FinalizeLatency prometheus.Histogram
}

// NewMetrics registers the archiver metrics on reg (nil: unregistered; again on the same
// registry: the series already there, lib/metrics).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Messages:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tau2rl_archiver_messages_total", Help: "Fetched messages by outcome (archived, duplicate, dead_letter)."}, []string{"outcome"}),
		BytesIn:         prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_archiver_bytes_in_total", Help: "Message value bytes fetched."}),
		Rows:            prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_archiver_rows_written_total", Help: "Rows in finalized Parquet files."}),
		DuplicateRows:   prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_archiver_duplicates_total", Help: "Rows dropped because their trajectory id was already archived."}),
		Files:           prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_archiver_files_written_total", Help: "Parquet files finalized (fsynced and renamed)."}),
		FileBytes:       prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_archiver_file_bytes_total", Help: "Bytes of finalized Parquet files."}),
		DeadLetters:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tau2rl_archiver_dead_letters_total", Help: "Messages sent to dead letters, by reason."}, []string{"reason"}),
		Errors:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tau2rl_archiver_errors_total", Help: "Archiver failures by stage."}, []string{"stage"}),
		OpenFiles:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "tau2rl_archiver_open_files", Help: "Parquet files being written."}),
		Uncommitted:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "tau2rl_archiver_uncommitted_messages", Help: "Fetched messages whose offsets cannot be committed yet."}),
		CommitLatency:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tau2rl_archiver_commit_seconds", Help: "Duration of an offset commit of durable progress.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		FinalizeLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tau2rl_archiver_finalize_seconds", Help: "Duration of footer, fsync, rename and directory fsync of one file.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	s := metrics.NewSet(reg)
	m.Messages = metrics.Add(s, m.Messages)
	m.BytesIn = metrics.Add(s, m.BytesIn)
	m.Rows = metrics.Add(s, m.Rows)
	m.DuplicateRows = metrics.Add(s, m.DuplicateRows)
	m.Files = metrics.Add(s, m.Files)
	m.FileBytes = metrics.Add(s, m.FileBytes)
	m.DeadLetters = metrics.Add(s, m.DeadLetters)
	m.Errors = metrics.Add(s, m.Errors)
	m.OpenFiles = metrics.Add(s, m.OpenFiles)
	m.Uncommitted = metrics.Add(s, m.Uncommitted)
	m.CommitLatency = metrics.Add(s, m.CommitLatency)
	m.FinalizeLatency = metrics.Add(s, m.FinalizeLatency)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("archiver: %w", err)
	}
	return m, nil
}
