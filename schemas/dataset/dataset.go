// Package dataset reads the Parquet trajectory archive (written by consumers/archiver with
// schemas.NewParquetWriter): it resolves a directory, file or glob to Parquet files, checks each
// file's schema version, and streams trajectories through filters on domain, split, task,
// policy version, reward and status. Replay and `tau2-eval report` read the archive through it.
package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"

	"tau2rl/schemas"
)

// Filter selects trajectories. The zero value selects every trajectory whose status is ok.
type Filter struct {
	// Domains keeps only these domains (empty = all). Files under a Hive directory
	// domain=<d> of another domain are skipped without being opened.
	Domains []string `yaml:"domains"`
	// Splits keeps only these splits (empty = all).
	Splits []string `yaml:"splits"`
	// TaskIDs keeps only these task ids (empty = all).
	TaskIDs []string `yaml:"task_ids"`
	// MinPolicyVersion and MaxPolicyVersion bound PolicyVersionStart, inclusive (nil = unbounded).
	MinPolicyVersion *int64 `yaml:"min_policy_version"`
	MaxPolicyVersion *int64 `yaml:"max_policy_version"`
	// MinReward and MaxReward bound τ²'s reward, inclusive (nil = unbounded).
	MinReward *float64 `yaml:"min_reward"`
	MaxReward *float64 `yaml:"max_reward"`
	// IncludeInfraErrors also yields trajectories whose status is not ok — infra_error,
	// not_evaluated (default false: they carry no reward and are normally excluded).
	IncludeInfraErrors bool `yaml:"include_infra_errors"`
	// KeepDuplicates yields every row; by default Dataset.Scan yields each trajectory id once
	// (the first row in file order) and counts the others in Stats.Duplicates, because delivery
	// is at least once and the archiver's de-duplication has a window (docs/OPERATIONS.md).
	KeepDuplicates bool `yaml:"keep_duplicates"`
}

// Validate rejects inverted ranges and unsafe domain names.
func (f *Filter) Validate() error {
	if f.MinPolicyVersion != nil && f.MaxPolicyVersion != nil && *f.MinPolicyVersion > *f.MaxPolicyVersion {
		return fmt.Errorf("dataset: filter: min_policy_version %d > max_policy_version %d", *f.MinPolicyVersion, *f.MaxPolicyVersion)
	}
	if f.MinReward != nil && f.MaxReward != nil && *f.MinReward > *f.MaxReward {
		return fmt.Errorf("dataset: filter: min_reward %v > max_reward %v", *f.MinReward, *f.MaxReward)
	}
	for _, d := range f.Domains {
		if err := schemas.ValidatePathComponent(d); err != nil {
			return fmt.Errorf("dataset: filter: domain: %w", err)
		}
	}
	return nil
}

// Match reports whether t passes the filter.
func (f *Filter) Match(t *schemas.Trajectory) bool {
	switch {
	case !f.IncludeInfraErrors && t.Status != schemas.StatusOK:
		return false
	case len(f.Domains) > 0 && !slices.Contains(f.Domains, t.Domain):
		return false
	case len(f.Splits) > 0 && !slices.Contains(f.Splits, t.Split):
		return false
	case len(f.TaskIDs) > 0 && !slices.Contains(f.TaskIDs, t.TaskID):
		return false
	case f.MinPolicyVersion != nil && t.PolicyVersionStart < *f.MinPolicyVersion:
		return false
	case f.MaxPolicyVersion != nil && t.PolicyVersionStart > *f.MaxPolicyVersion:
		return false
	case f.MinReward != nil && t.Reward < *f.MinReward:
		return false
	case f.MaxReward != nil && t.Reward > *f.MaxReward:
		return false
	}
	return true
}

// matchPartition reports whether a file path can hold rows of the filter's domains, using its
// Hive directory domain=<d> when present.
func (f *Filter) matchPartition(path string) bool {
	if len(f.Domains) == 0 {
		return true
	}
	for _, part := range strings.Split(filepath.ToSlash(path), "/") {
		if d, ok := strings.CutPrefix(part, "domain="); ok {
			return slices.Contains(f.Domains, d)
		}
	}
	return true
}

// Stats counts what a scan did.
type Stats struct {
	// Files is the number of Parquet files opened; FilesPruned were skipped by partition.
	Files, FilesPruned int
	// RowsRead is the number of rows decoded; RowsMatched passed the filter (duplicates
	// included).
	RowsRead, RowsMatched int64
	// Duplicates is the number of matching rows skipped because a row with the same trajectory
	// id was yielded before (0 with Filter.KeepDuplicates).
	Duplicates int64
}

// Dataset is a resolved, sorted list of Parquet files.
type Dataset struct {
	Files []string
}

// Open resolves path to Parquet files: a directory is walked recursively for *.parquet, a file is
// taken as is, and anything containing glob metacharacters is expanded with filepath.Glob (matched
// directories are walked). Names starting with '.' or '_', such as in-progress temporary files,
// are skipped in walks and glob results. It is an error
// when nothing matches, so a typo never reads as an empty dataset.
func Open(path string) (*Dataset, error) {
	var files []string
	if strings.ContainsAny(path, "*?[") {
		m, err := filepath.Glob(path)
		if err != nil {
			return nil, fmt.Errorf("dataset: glob %q: %w", path, err)
		}
		for _, p := range m {
			st, err := os.Stat(p)
			if err != nil {
				return nil, fmt.Errorf("dataset: %w", err)
			}
			if st.IsDir() {
				sub, err := walk(p)
				if err != nil {
					return nil, err
				}
				files = append(files, sub...)
			} else if !hidden(filepath.Base(p)) {
				files = append(files, p)
			}
		}
	} else {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
		if st.IsDir() {
			if files, err = walk(path); err != nil {
				return nil, err
			}
		} else {
			files = []string{path}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("dataset: no Parquet files at %q", path)
	}
	sort.Strings(files)
	files = slices.Compact(files)
	return &Dataset{Files: files}, nil
}

func walk(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != root && hidden(name) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(name, ".parquet") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dataset: walk %s: %w", root, err)
	}
	return files, nil
}

// hidden reports names that are never dataset files: in-progress temporaries and metadata.
func hidden(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// readBatch is the number of rows decoded per read call.
const readBatch = 64

// Scan reads every file in order and calls fn for each trajectory that passes the filter, once per
// trajectory id unless filter.KeepDuplicates. fn owns the trajectory. A file with an unsupported schema version or a malformed row stops the scan with
// an error naming the file (errors.Is(err, schemas.ErrUnsupportedVersion) for versions); fn's
// error stops it too and is returned as is. ctx cancellation is checked between batches.
func (d *Dataset) Scan(ctx context.Context, filter Filter, fn func(*schemas.Trajectory) error) (Stats, error) {
	var st Stats
	if err := filter.Validate(); err != nil {
		return st, err
	}
	if !filter.KeepDuplicates {
		// One id once: about 40 bytes per matching row for the scan's duration.
		seen := map[schemas.IDKey]struct{}{}
		yield := fn
		fn = func(t *schemas.Trajectory) error {
			k := schemas.KeyOfID(t.ID)
			if _, dup := seen[k]; dup {
				st.Duplicates++
				return nil
			}
			seen[k] = struct{}{}
			return yield(t)
		}
	}
	for _, path := range d.Files {
		if !filter.matchPartition(path) {
			st.FilesPruned++
			continue
		}
		st.Files++
		if err := scanFile(ctx, path, &filter, &st, fn); err != nil {
			return st, err
		}
	}
	return st, nil
}

// errStop distinguishes the callback's error from read errors.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }

func scanFile(ctx context.Context, path string, filter *Filter, st *Stats, fn func(*schemas.Trajectory) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	err = ScanReader(ctx, f, filter, st, fn)
	var stop errStop
	if errors.As(err, &stop) {
		return stop.err
	}
	if err != nil {
		return fmt.Errorf("dataset: %s: %w", path, err)
	}
	return nil
}

// ScanReader scans one Parquet file given as an io.ReaderAt with a Size (os.File, bytes.Reader),
// updating st. It is the per-file step of Dataset.Scan, exported for readers of in-memory files.
func ScanReader(ctx context.Context, r io.ReaderAt, filter *Filter, st *Stats, fn func(*schemas.Trajectory) error) (err error) {
	// parquet-go panics on some malformed files and incompatible schemas instead of returning
	// errors; a corrupt archive file must be reported, not crash the reader.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorruptFile, p)
		}
	}()
	size, err := readerSize(r)
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(r, size)
	if err != nil {
		return fmt.Errorf("open parquet: %w", err)
	}
	if err := schemas.CheckParquetFile(pf); err != nil {
		return err
	}
	rd := parquet.NewGenericReader[schemas.ParquetRow](pf)
	defer rd.Close()
	rows := make([]schemas.ParquetRow, readBatch)
	for {
		if err := ctx.Err(); err != nil {
			return errStop{err}
		}
		// Zero the buffer so the reader allocates fresh slices: trajectories handed to fn alias
		// them and may be kept.
		clear(rows)
		n, err := rd.Read(rows)
		for i := 0; i < n; i++ {
			st.RowsRead++
			t, cerr := schemas.FromParquetRow(&rows[i])
			if cerr != nil {
				return fmt.Errorf("row %d: %w", st.RowsRead-1, cerr)
			}
			if !filter.Match(t) {
				continue
			}
			st.RowsMatched++
			if ferr := fn(t); ferr != nil {
				return errStop{ferr}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read rows: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("read rows: reader made no progress")
		}
	}
}

func readerSize(r io.ReaderAt) (int64, error) {
	switch v := r.(type) {
	case *os.File:
		st, err := v.Stat()
		if err != nil {
			return 0, fmt.Errorf("stat: %w", err)
		}
		return st.Size(), nil
	case *bytes.Reader:
		return v.Size(), nil
	case interface{ Size() int64 }:
		return v.Size(), nil
	}
	return 0, fmt.Errorf("reader %T has no size", r)
}

// ReadAll collects the matching trajectories of the dataset (for small datasets and tests).
func (d *Dataset) ReadAll(ctx context.Context, filter Filter) ([]*schemas.Trajectory, Stats, error) {
	var out []*schemas.Trajectory
	st, err := d.Scan(ctx, filter, func(t *schemas.Trajectory) error {
		out = append(out, t)
		return nil
	})
	return out, st, err
}
