// Package manifest is the format of a release's manifest.json: what a release holds (schema
// version, rows per Hive partition, every file's size and SHA-256, the source Kafka offsets, the
// selection it was cut with), how it is parsed and checked, and how a downloaded release is
// verified against it. consumers/release writes it when it cuts a release; trainer/sft reads it
// before training on one. It lives with the data contract, below both, so the trainer does not
// import the consumers' release cutter to read a file format.
package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

// FileName is the manifest's name inside a release directory.
const FileName = "manifest.json"

// Manifest is manifest.json.
type Manifest struct {
	Name          string    `json:"name"`
	Description   string    `json:"description,omitempty"`
	Created       time.Time `json:"created"`
	SchemaVersion string    `json:"schema_version"`
	// Source is the archive the release was cut from.
	Source string `json:"source"`
	// Filters are the selection, as configured.
	Filters           Selection   `json:"filters"`
	Rows              int64       `json:"rows"`
	DuplicatesDropped int64       `json:"duplicates_dropped"`
	Partitions        []Partition `json:"partitions"`
	Files             []File      `json:"files"`
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

// Partition counts rows per Hive partition.
type Partition struct {
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Files int    `json:"files"`
}

// File describes one released file.
type File struct {
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

// Read reads and checks a release's manifest.json (used to verify a
// downloaded release: every file's size and SHA-256 must match).
func Read(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return Parse(b)
}

// Parse parses and checks manifest.json bytes: a known schema
// major, file paths that stay inside the release, and counts that add up.
func Parse(b []byte) (*Manifest, error) {
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

// Hash returns the size and hex SHA-256 of f's whole content (read from offset 0 whatever f's
// position), as File records them.
func Hash(f *os.File) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
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
		size, sum, err := Hash(f)
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
