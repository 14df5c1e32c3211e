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
package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"tau2rl/consumers/dataset"
	"tau2rl/lib/durable"
	"tau2rl/lib/logs"
	"tau2rl/schemas"
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
	return c.Filter.Validate()
}

// Manifest is manifest.json.
type Manifest struct {
	Name          string    `json:"name"`
	Description   string    `json:"description,omitempty"`
	Created       time.Time `json:"created"`
	SchemaVersion string    `json:"schema_version"`
	// Source is the archive the release was cut from.
	Source string `json:"source"`
	// Filters are the selection, as configured.
	Filters           Selection           `json:"filters"`
	Rows              int64               `json:"rows"`
	DuplicatesDropped int64               `json:"duplicates_dropped"`
	Partitions        []PartitionManifest `json:"partitions"`
	Files             []FileManifest      `json:"files"`
	// KafkaOffsets are the source offset ranges per topic partition of the
	// archive files the release drew from (from their footers).
	KafkaOffsets []schemas.OffsetRange `json:"kafka_offsets"`
}

// Selection records the filters in the manifest.
type Selection struct {
	Filter   dataset.Filter `json:"filter"`
	DateFrom string         `json:"date_from,omitempty"`
	DateTo   string         `json:"date_to,omitempty"`
}

// PartitionManifest counts rows per Hive partition.
type PartitionManifest struct {
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Files int    `json:"files"`
}

// FileManifest describes one released file.
type FileManifest struct {
	Path   string `json:"path"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Mode is "copy" (byte-identical to the archive file) or "rewrite"
	// (the matching rows only).
	Mode string `json:"mode"`
	// Source is the archive file it came from, relative to the source root.
	Source       string                `json:"source"`
	KafkaOffsets []schemas.OffsetRange `json:"kafka_offsets,omitempty"`
}

// Cut writes the release described by cfg and returns its manifest; log may be nil (discards).
// Its errors (and Validate's) name the file or setting, not the package: the command that runs
// it says "tau2-archiver release: …" already, and a prefix here doubled it.
func Cut(ctx context.Context, cfg Config, log *slog.Logger) (*Manifest, error) {
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
	m := &Manifest{
		Name: cfg.Name, Description: cfg.Description, Created: time.Now().UTC(), SchemaVersion: schemas.SchemaVersion,
		Source: cfg.Source, Filters: Selection{Filter: cfg.Filter, DateFrom: dateString(from), DateTo: dateString(to)},
	}
	seen := map[string]struct{}{}
	parts := map[string]*PartitionManifest{}
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
			pm = &PartitionManifest{Path: partDir}
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
	if err := writeDurable(filepath.Join(cfg.Out, "manifest.json"), append(mj, '\n')); err != nil {
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
func releaseFile(ctx context.Context, cfg Config, src, rel string, seen map[string]struct{}, m *Manifest) (*FileManifest, error) {
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
	size, sum, err := hashFile(tmp)
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
	return &FileManifest{Path: filepath.ToSlash(rel), Rows: kept, Bytes: size, SHA256: sum, Mode: mode,
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

func hashFile(f *os.File) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

func writeDurable(p string, data []byte) error {
	if err := durable.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	return nil
}

// ReadManifest reads and checks a release's manifest.json (used to verify a
// downloaded release: every file's size and SHA-256 must match).
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return ParseManifest(b)
}

// ParseManifest parses and checks manifest.json bytes: a known schema
// major, file paths that stay inside the release, and counts that add up.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("release: manifest.json: %w", err)
	}
	if _, err := schemas.CheckVersion(m.SchemaVersion, "release manifest"); err != nil {
		return nil, err
	}
	var rows int64
	for _, f := range m.Files {
		if err := safeRelPath(f.Path); err != nil {
			return nil, err
		}
		if f.Rows < 0 || f.Bytes < 0 || len(f.SHA256) != 64 {
			return nil, fmt.Errorf("release: manifest file %q: bad rows, bytes or sha256", f.Path)
		}
		rows += f.Rows
	}
	if rows != m.Rows {
		return nil, fmt.Errorf("release: manifest rows %d, files hold %d", m.Rows, rows)
	}
	return &m, nil
}

// safeRelPath accepts only relative slash paths without "." or ".." parts.
func safeRelPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return fmt.Errorf("release: manifest path %q is not relative", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("release: manifest path %q escapes the release", p)
		}
	}
	return nil
}

// Verify checks every file of the release against the manifest.
func Verify(dir string, m *Manifest) error {
	var errs []error
	for _, fm := range m.Files {
		if err := safeRelPath(fm.Path); err != nil {
			errs = append(errs, err)
			continue
		}
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(fm.Path)))
		if err != nil {
			errs = append(errs, fmt.Errorf("release: %w", err))
			continue
		}
		size, sum, err := hashFile(f)
		f.Close()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("release: %s: %w", fm.Path, err))
		case size != fm.Bytes || sum != fm.SHA256:
			errs = append(errs, fmt.Errorf("release: %s: size %d sha256 %s, manifest says %d %s", fm.Path, size, sum, fm.Bytes, fm.SHA256))
		}
	}
	return errors.Join(errs...)
}
