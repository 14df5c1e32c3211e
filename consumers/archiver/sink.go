package archiver

import (
	"fmt"
	"io"

	"tau2rl/schemas"
)

// ParquetSink returns a SinkFactory for the archive's Parquet layout: schemas.ParquetWriter, the
// project's one Parquet writer, with opts (the archiver's `parquet.*` settings, whose defaults are
// schemas.DefaultParquetWriterOptions: zstd fastest, 256-row groups, 1 MiB page buffers) and
// created_by "tau2rl archiver". The archiver adds its footer keys at close time with
// SetKeyValueMetadata and rolls files by Size.
func ParquetSink(opts schemas.ParquetWriterOptions) (SinkFactory, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("archiver: %w", err)
	}
	opts.CreatedBy = "tau2rl archiver"
	return func(w io.Writer) (Sink, error) {
		return schemas.NewParquetWriter(w, opts)
	}, nil
}
