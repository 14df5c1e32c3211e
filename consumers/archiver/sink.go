package archiver

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"tau2rl/schemas"
)

// ParquetConfig tunes the Parquet files the archiver writes. The row layout
// is schemas.ParquetRow (schemas owns it); compression is always zstd
// (parquet-go's LZ4 reader is broken, parquet-go#608).
type ParquetConfig struct {
	// ZstdLevel is fastest (default), default, better or best. fastest
	// writes about 2.5× faster than default for about 7% larger files
	// (building-blocks §3), which matters on a 2-core archiver.
	ZstdLevel string `yaml:"zstd_level"`
	// RowGroupRows caps rows per row group. Default 256 (as schemas).
	RowGroupRows int64 `yaml:"row_group_rows"`
	// PageBufferSize is the per-column page buffer in bytes. Default 1 MiB.
	PageBufferSize int `yaml:"page_buffer_size"`
}

// DefaultParquetConfig returns the defaults documented on ParquetConfig.
func DefaultParquetConfig() ParquetConfig {
	return ParquetConfig{ZstdLevel: "fastest", RowGroupRows: 256, PageBufferSize: 1 << 20}
}

func (c ParquetConfig) level() (zstd.Level, error) {
	switch c.ZstdLevel {
	case "", "fastest":
		return zstd.SpeedFastest, nil
	case "default":
		return zstd.SpeedDefault, nil
	case "better":
		return zstd.SpeedBetterCompression, nil
	case "best":
		return zstd.SpeedBestCompression, nil
	}
	return 0, fmt.Errorf("archiver: parquet.zstd_level %q is not fastest, default, better or best", c.ZstdLevel)
}

// Validate reports configuration errors.
func (c ParquetConfig) Validate() error {
	if _, err := c.level(); err != nil {
		return err
	}
	if c.RowGroupRows < 1 || c.PageBufferSize < 1<<10 {
		return fmt.Errorf("archiver: parquet.row_group_rows must be ≥ 1 and parquet.page_buffer_size ≥ 1 KiB")
	}
	return nil
}

// parquetSink writes schemas.ParquetRow rows with the schema version in the
// footer, like schemas.NewParquetWriter, and adds what the archiver needs on
// top: footer metadata set at close time (the source offsets are known only
// then) and a size estimate for rolling.
type parquetSink struct {
	w    *parquet.GenericWriter[schemas.ParquetRow]
	rows []schemas.ParquetRow
}

// ParquetSink returns a SinkFactory for the archive's Parquet layout.
func ParquetSink(cfg ParquetConfig) (SinkFactory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	level, _ := cfg.level()
	return func(w io.Writer) (Sink, error) {
		return &parquetSink{w: parquet.NewGenericWriter[schemas.ParquetRow](w,
			schemas.ParquetSchema,
			parquet.Compression(&zstd.Codec{Level: level}),
			parquet.MaxRowsPerRowGroup(cfg.RowGroupRows),
			parquet.PageBufferSize(cfg.PageBufferSize),
			parquet.KeyValueMetadata(schemas.MetadataKeyVersion, schemas.SchemaVersion),
			parquet.CreatedBy("tau2rl archiver", schemas.SchemaVersion, ""),
		)}, nil
	}, nil
}

func (s *parquetSink) Write(trajs []*schemas.Trajectory) error {
	s.rows = s.rows[:0]
	for _, t := range trajs {
		r, err := schemas.ToParquetRow(t)
		if err != nil {
			return err
		}
		s.rows = append(s.rows, r)
	}
	_, err := s.w.Write(s.rows)
	clear(s.rows)
	return err
}

func (s *parquetSink) Flush() error                    { return s.w.Flush() }
func (s *parquetSink) SetKeyValueMetadata(k, v string) { s.w.SetKeyValueMetadata(k, v) }
func (s *parquetSink) Size() int64                     { return s.w.Size() }
func (s *parquetSink) Close() error                    { return s.w.Close() }
