package archiver

import (
	"errors"
	"fmt"
	"time"

	"tau2rl/schemas"
)

// Config configures the archiver (the `archiver:` block of tau2-archiver's
// YAML). DefaultConfig documents the defaults.
type Config struct {
	// DatasetDir is the dataset root; Hive partitions
	// domain=<d>/date=<YYYY-MM-DD>/ are created under it. Default
	// "data/trajectories".
	DatasetDir string `yaml:"dataset_dir"`
	// Group is the Kafka consumer group. Default "archiver".
	Group string `yaml:"group"`
	// Topic overrides the trajectories topic of the kafka config; empty
	// uses kafka.topics.trajectories. Default "".
	Topic string `yaml:"topic"`
	// Roll says when a Parquet file is closed and made visible.
	Roll RollConfig `yaml:"roll"`
	// RowGroupBytes flushes a row group once this many estimated bytes are
	// buffered for a file; it bounds the memory of each open file. Default
	// 32 MiB.
	RowGroupBytes int64 `yaml:"row_group_bytes"`
	// MaxOpenFiles closes the oldest file when more partitions than this
	// are open at once. Default 32.
	MaxOpenFiles int `yaml:"max_open_files"`
	// DedupWindow is how many recent trajectory ids are remembered to drop
	// duplicates published twice by producers (16 bytes + map overhead,
	// about 40 MB per million); start-up reloads it from the newest data
	// files, so it holds across restarts. Redeliveries by Kafka are removed
	// regardless of the window (see the package documentation). Default
	// 1,000,000.
	DedupWindow int `yaml:"dedup_window"`
	// CommitInterval is how often durable progress is committed and time
	// rolls are checked. Default 1s.
	CommitInterval time.Duration `yaml:"commit_interval"`
	// DecodeWorkers decode Arrow messages in parallel (order is kept).
	// Default 2.
	DecodeWorkers int `yaml:"decode_workers"`
	// Parquet tunes the files: the one Parquet writer's settings (schemas.ParquetWriterOptions:
	// zstd level, row groups, page buffers; defaults zstd fastest, 256 rows, 1 MiB).
	Parquet schemas.ParquetWriterOptions `yaml:"parquet"`
}

// RollConfig says when a file is rolled (finalized and a new one started).
type RollConfig struct {
	// MaxBytes closes a file once its estimated size reaches it. Default
	// 128 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxAge closes a file this long after it was opened, however small.
	// Offsets are committed only for closed files, so this also bounds
	// the commit delay and how much is redelivered after a crash. Default
	// 60s.
	MaxAge time.Duration `yaml:"max_age"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		DatasetDir:     "data/trajectories",
		Group:          "archiver",
		Roll:           RollConfig{MaxBytes: 128 << 20, MaxAge: 60 * time.Second},
		RowGroupBytes:  32 << 20,
		MaxOpenFiles:   32,
		DedupWindow:    1_000_000,
		CommitInterval: time.Second,
		DecodeWorkers:  2,
		Parquet:        schemas.DefaultParquetWriterOptions(),
	}
}

// Validate reports configuration errors, naming YAML fields.
func (c *Config) Validate() error {
	var errs []error
	if c.DatasetDir == "" {
		errs = append(errs, errors.New("dataset_dir: required"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("group: required"))
	}
	if c.Roll.MaxBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("roll.max_bytes: %d is below 1 KiB", c.Roll.MaxBytes))
	}
	if c.Roll.MaxAge <= 0 {
		errs = append(errs, errors.New("roll.max_age: must be positive"))
	}
	if c.RowGroupBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("row_group_bytes: %d is below 1 KiB", c.RowGroupBytes))
	}
	if c.MaxOpenFiles < 1 {
		errs = append(errs, fmt.Errorf("max_open_files: %d must be ≥ 1", c.MaxOpenFiles))
	}
	if c.DedupWindow < 0 {
		errs = append(errs, fmt.Errorf("dedup_window: %d must be ≥ 0", c.DedupWindow))
	}
	if c.CommitInterval <= 0 {
		errs = append(errs, errors.New("commit_interval: must be positive"))
	}
	if c.DecodeWorkers < 1 {
		errs = append(errs, fmt.Errorf("decode_workers: %d must be ≥ 1", c.DecodeWorkers))
	}
	if err := c.Parquet.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("archiver config: %w", errors.Join(errs...))
	}
	return nil
}

// version is recorded in every file the archiver writes.
var version = "tau2-archiver schema " + schemas.SchemaVersion
