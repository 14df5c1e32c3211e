package dataset

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"tau2rl/lib/durable"
	"tau2rl/schemas"
)

// WriteFile writes trajectories to one Parquet file durably, through lib/durable: into a
// temporary "."-prefixed file in the same directory (which Open skips), fsync, rename, fsync of
// the directory. No binary calls it today: tests build their fixture datasets with it. The
// streaming archiver and releases (consumers/release, which copies or rewrites archive files with
// their footers) manage their own files.
func WriteFile(path string, trajs []*schemas.Trajectory, opts schemas.ParquetWriterOptions) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dataset: write %s: %w", path, err)
	}
	err := durable.Write(path, 0o644, func(f io.Writer) error {
		w, err := schemas.NewParquetWriter(f, opts)
		if err != nil {
			return err
		}
		if err := w.Write(trajs); err != nil {
			return err
		}
		return w.Close()
	})
	if err != nil {
		return fmt.Errorf("dataset: write %s: %w", path, err)
	}
	return nil
}

// WritePartitioned writes trajectories under root in the archive's Hive layout,
// root/domain=<d>/date=<YYYY-MM-DD>/<name>.parquet (one file per partition, dated by EndedAt in
// UTC), and returns the files written in sorted order. Trajectories must be valid (domain
// path-safe, EndedAt set).
func WritePartitioned(root, name string, trajs []*schemas.Trajectory, opts schemas.ParquetWriterOptions) ([]string, error) {
	if err := schemas.ValidatePathComponent(name); err != nil {
		return nil, fmt.Errorf("dataset: file name: %w", err)
	}
	parts := map[string][]*schemas.Trajectory{}
	for _, t := range trajs {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
		dir, err := schemas.PartitionDir(t.Domain, t.EndedAt)
		if err != nil {
			return nil, fmt.Errorf("dataset: trajectory %s: %w", t.ID, err)
		}
		parts[dir] = append(parts[dir], t)
	}
	var files []string
	for dir, ts := range parts {
		p := filepath.Join(root, filepath.FromSlash(dir), name+".parquet")
		if err := WriteFile(p, ts, opts); err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	sort.Strings(files)
	return files, nil
}
