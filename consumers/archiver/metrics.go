package archiver

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the archiver's Prometheus series. Transport-level series
// (bytes in, consumer lag, commit latency per topic) come from
// consumers/kafka's Metrics on the same registry.
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
		m.Messages = register(reg, m.Messages)
		m.BytesIn = register(reg, m.BytesIn)
		m.Rows = register(reg, m.Rows)
		m.DuplicateRows = register(reg, m.DuplicateRows)
		m.Files = register(reg, m.Files)
		m.FileBytes = register(reg, m.FileBytes)
		m.DeadLetters = register(reg, m.DeadLetters)
		m.Errors = register(reg, m.Errors)
		m.OpenFiles = register(reg, m.OpenFiles)
		m.Uncommitted = register(reg, m.Uncommitted)
		m.CommitLatency = register(reg, m.CommitLatency)
		m.FinalizeLatency = register(reg, m.FinalizeLatency)
	}
	return m
}

// register registers c or returns the identical collector already there
// (several archivers in one test process share a registry). A clash with a
// different collector of the same name is a programming error and panics at
// start-up, as prometheus.MustRegister does.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
