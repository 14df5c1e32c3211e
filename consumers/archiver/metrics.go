package archiver

import (
	tkafka "tau2rl/lib/stream/kafka"

	"github.com/prometheus/client_golang/prometheus"
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

// NewMetrics registers the archiver metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
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
	if reg != nil {
		m.Messages = tkafka.RegisterOrReuse(reg, m.Messages)
		m.BytesIn = tkafka.RegisterOrReuse(reg, m.BytesIn)
		m.Rows = tkafka.RegisterOrReuse(reg, m.Rows)
		m.DuplicateRows = tkafka.RegisterOrReuse(reg, m.DuplicateRows)
		m.Files = tkafka.RegisterOrReuse(reg, m.Files)
		m.FileBytes = tkafka.RegisterOrReuse(reg, m.FileBytes)
		m.DeadLetters = tkafka.RegisterOrReuse(reg, m.DeadLetters)
		m.Errors = tkafka.RegisterOrReuse(reg, m.Errors)
		m.OpenFiles = tkafka.RegisterOrReuse(reg, m.OpenFiles)
		m.Uncommitted = tkafka.RegisterOrReuse(reg, m.Uncommitted)
		m.CommitLatency = tkafka.RegisterOrReuse(reg, m.CommitLatency)
		m.FinalizeLatency = tkafka.RegisterOrReuse(reg, m.FinalizeLatency)
	}
	return m
}
