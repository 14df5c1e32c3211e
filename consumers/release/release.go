// Package release cuts a dataset for publication from the archiver's
// Parquet dataset: the trajectories chosen by filters (domain, split, policy
// version range, reward range, date range), de-duplicated by trajectory id
// over the whole release, as Parquet files in the same Hive layout, plus a
// manifest.json (schema version, row counts per partition, SHA-256 of every
// file, the source Kafka offsets) and a README.md dataset card that
// documents every column.
//
// A source file whose rows all pass the filters (and none is a duplicate) is
// copied byte for byte; otherwise its matching rows are rewritten into a new
// file with the same name. Every output file is written under a temporary
// name, fsynced and renamed; the manifest is written last, so a release
// directory with a manifest.json is complete.
//
// The manifest's format, and reading and verifying a release by it, are schemas/manifest's: the
// trainer reads releases without importing this writer.
package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/parquet-go/parquet-go"

	"tau2rl/lib/durable"
	"tau2rl/lib/logs"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/manifest"
)

// Usage is the help text of `tau2-archiver release`.
const Usage = `tau2-archiver release — cut a dataset for publication from the archive

Selects trajectories from the archiver's dataset (source) with filters, drops
duplicate trajectory ids, and writes out/ with the Parquet files (same Hive
layout), manifest.json (schema version, rows per partition, sha256 of every
file, source Kafka offsets) and README.md (a dataset card describing every
column). out must not exist or be empty.

Examples:
  tau2-archiver release source=data/trajectories out=releases/airline-v1 \
      filter.domains=[airline] filter.splits=[train] \
      filter.min_policy_version=10 filter.max_policy_version=20 \
      date_from=2026-11-01 date_to=2026-11-30`

// Config selects what goes into a release.
type Config struct {
	// Source is the archive root (the archiver's dataset_dir). Default data/trajectories.
	Source string `yaml:"source"`
	// Out is the release directory to create. Required.
	Out string `yaml:"out"`
	// Name names the release in the manifest and card; default the base name of Out.
	Name string `yaml:"name"`
	// Description is a free text for the card.
	Description string `yaml:"description"`
	// Filter selects trajectories by domain, split, task, policy version
	// (policy_version_start), reward and status (infra errors are excluded
	// unless include_infra_errors).
	Filter dataset.Filter `yaml:"filter"`
	// DateFrom and DateTo bound the partition date (YYYY-MM-DD, UTC,
	// inclusive); empty is unbounded.
	DateFrom string `yaml:"date_from"`
	DateTo   string `yaml:"date_to"`
	// Parquet configures rewritten files (copied files keep theirs).
	Parquet schemas.ParquetWriterOptions `yaml:"parquet"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Source: "data/trajectories", Parquet: schemas.DefaultParquetWriterOptions()}
}

func (c *Config) dates() (from, to time.Time, err error) {
	parse := func(s, name string) (time.Time, error) {
		if s == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			// YAML reads an unquoted 2026-11-01 given as key=value as a
			// timestamp, which reaches us as RFC 3339 midnight.
			ts, err2 := time.Parse(time.RFC3339, s)
			if err2 != nil || !ts.Equal(ts.Truncate(24*time.Hour)) {
				return time.Time{}, fmt.Errorf("%s %q: want YYYY-MM-DD", name, s)
			}
			t = ts.UTC()
		}
		return t, nil
	}
	if from, err = parse(c.DateFrom, "date_from"); err != nil {
		return
	}
	if to, err = parse(c.DateTo, "date_to"); err != nil {
		return
	}
	if !from.IsZero() && !to.IsZero() && from.After(to) {
		err = fmt.Errorf("date_from %s is after date_to %s", c.DateFrom, c.DateTo)
	}
	return
}

// Validate reports configuration errors.
func (c *Config) Validate() error {
	if c.Source == "" || c.Out == "" {
		return errors.New("source and out are required")
	}
	if _, _, err := c.dates(); err != nil {
		return err
	}
	if err := c.Parquet.Validate(); err != nil {
		return err
	}
	return c.Filter.Validate()
}

// Cut writes the release described by cfg and returns its manifest; log may be nil (discards).
// Its errors (and Validate's) name the file or setting, not the package: the command that runs
// it says "tau2-archiver release: …" already, and a prefix here doubled it.
func Cut(ctx context.Context, cfg Config, log *slog.Logger) (*manifest.Manifest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = logs.OrDiscard(log)
	if cfg.Name == "" {
		cfg.Name = filepath.Base(filepath.Clean(cfg.Out))
	}
	if err := prepareOut(cfg.Out); err != nil {
		return nil, err
	}
	from, to, _ := cfg.dates()
	ds, err := dataset.Open(cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	m := &manifest.Manifest{
		Name: cfg.Name, Description: cfg.Description, Created: time.Now().UTC(), SchemaVersion: schemas.SchemaVersion,
		Source: cfg.Source, Filters: manifest.Selection{Filter: cfg.Filter, DateFrom: dateString(from), DateTo: dateString(to)},
	}
	seen := map[string]struct{}{}
	parts := map[string]*manifest.Partition{}
	offsets := map[[2]string]*schemas.OffsetRange{}
	for _, src := range ds.Files {
		rel, err := filepath.Rel(cfg.Source, src)
		if err != nil {
			return nil, err
		}
		partDir := filepath.ToSlash(filepath.Dir(rel))
		p, err := schemas.ParsePartitionDir(partDir)
		if err != nil {
			return nil, fmt.Errorf("%s is not in the archive layout: %w", rel, err)
		}
		if len(cfg.Filter.Domains) > 0 && !contains(cfg.Filter.Domains, p.Domain) ||
			!from.IsZero() && p.Date.Before(from) || !to.IsZero() && p.Date.After(to) {
			continue
		}
		fm, err := releaseFile(ctx, cfg, src, rel, seen, m)
		if err != nil {
			return nil, err
		}
		if fm == nil {
			continue
		}
		log.Info("released file", "path", fm.Path, "rows", fm.Rows, "mode", fm.Mode)
		m.Files = append(m.Files, *fm)
		m.Rows += fm.Rows
		pm := parts[partDir]
		if pm == nil {
			pm = &manifest.Partition{Path: partDir}
			parts[partDir] = pm
		}
		pm.Rows += fm.Rows
		pm.Files++
		for _, r := range fm.KafkaOffsets {
			k := [2]string{r.Topic, fmt.Sprint(r.Partition)}
			if o := offsets[k]; o == nil {
				rc := r
				offsets[k] = &rc
			} else {
				o.First, o.Last, o.Messages = min(o.First, r.First), max(o.Last, r.Last), o.Messages+r.Messages
			}
		}
	}
	for _, pm := range parts {
		m.Partitions = append(m.Partitions, *pm)
	}
	sort.Slice(m.Partitions, func(i, j int) bool { return m.Partitions[i].Path < m.Partitions[j].Path })
	for _, o := range offsets {
		m.KafkaOffsets = append(m.KafkaOffsets, *o)
	}
	sort.Slice(m.KafkaOffsets, func(i, j int) bool {
		a, b := m.KafkaOffsets[i], m.KafkaOffsets[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	card, err := Card(m)
	if err != nil {
		return nil, err
	}
	if err := writeDurable(filepath.Join(cfg.Out, "README.md"), card); err != nil {
		return nil, err
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := writeDurable(filepath.Join(cfg.Out, manifest.FileName), append(mj, '\n')); err != nil {
		return nil, err
	}
	return m, nil
}

func dateString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02")
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func prepareOut(out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", out, err)
		}
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty; a release is written into a new directory", out)
	}
	return nil
}

// releaseFile scans one archive file: its matching, not yet released rows
// are written to a rewrite; if that is every row, the original is copied
// instead. It returns nil when no row of the file is released.
func releaseFile(ctx context.Context, cfg Config, src, rel string, seen map[string]struct{}, m *manifest.Manifest) (*manifest.File, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var ranges []schemas.OffsetRange
	offsetsMeta := ""
	if pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true)); err == nil {
		if v, ok := pf.Lookup(schemas.MetaKafkaOffsets); ok {
			if ranges, err = schemas.ParseOffsets(v); err != nil {
				return nil, fmt.Errorf("%s: %w", rel, err)
			}
			offsetsMeta = v
		}
	}

	outPath := filepath.Join(cfg.Out, rel)
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(outPath), "."+filepath.Base(outPath)+".*.tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op error
	defer tmp.Close()
	opts := cfg.Parquet
	opts.Metadata = map[string]string{"tau2rl.release": cfg.Name, "tau2rl.release_source": rel}
	if offsetsMeta != "" {
		opts.Metadata[schemas.MetaKafkaOffsets] = offsetsMeta
	}
	w, err := schemas.NewParquetWriter(tmp, opts)
	if err != nil {
		return nil, err
	}
	var scan dataset.Stats
	var kept, dups int64
	filter := cfg.Filter
	err = dataset.ScanReader(ctx, f, &filter, &scan, func(t *schemas.Trajectory) error {
		if _, dup := seen[t.ID]; dup {
			dups++
			return nil
		}
		seen[t.ID] = struct{}{}
		kept++
		return w.Write([]*schemas.Trajectory{t})
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	m.DuplicatesDropped += dups
	if kept == 0 {
		return nil, nil
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	mode := "rewrite"
	if kept == scan.RowsRead {
		// Every row is released: publish the archive file itself.
		mode = "copy"
		if err := copyInto(tmp, f); err != nil {
			return nil, fmt.Errorf("copy %s: %w", rel, err)
		}
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	size, sum, err := manifest.Hash(tmp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), outPath); err != nil {
		return nil, err
	}
	if err := durable.SyncDir(filepath.Dir(outPath)); err != nil {
		return nil, err
	}
	return &manifest.File{Path: filepath.ToSlash(rel), Rows: kept, Bytes: size, SHA256: sum, Mode: mode,
		Source: filepath.ToSlash(rel), KafkaOffsets: ranges}, nil
}

// copyInto replaces dst's content with src's.
func copyInto(dst, src *os.File) error {
	if err := dst.Truncate(0); err != nil {
		return err
	}
	if _, err := dst.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(dst, io.NewSectionReader(src, 0, 1<<62))
	return err
}

func writeDurable(p string, data []byte) error {
	if err := durable.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	return nil
}
