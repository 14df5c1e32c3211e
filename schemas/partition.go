package schemas

import (
	"fmt"
	"path"
	"time"
)

// maxComponentLen bounds a path component well under common filesystem name limits.
const maxComponentLen = 128

// ValidatePathComponent accepts only names that are safe as one directory level of the Parquet
// dataset (Hive partition values): 1–128 characters from [A-Za-z0-9._-], not starting with '.'
// and not "." or "..". Anything else ("../../etc", "a/b", "", spaces, "=") is an error, so a
// hostile or corrupt domain can never escape the archive root.
func ValidatePathComponent(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrUnsafePath)
	}
	if len(s) > maxComponentLen {
		return fmt.Errorf("%w: %d bytes (max %d)", ErrUnsafePath, len(s), maxComponentLen)
	}
	if s[0] == '.' {
		return fmt.Errorf("%w: %q starts with '.'", ErrUnsafePath, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q has byte %q at %d", ErrUnsafePath, s, c, i)
		}
	}
	return nil
}

// PartitionDir is the Hive partition directory of a trajectory in the Parquet dataset,
// "domain=<domain>/date=<YYYY-MM-DD>" (slash-separated, relative), dated by the UTC day of
// endedAt. DuckDB reads the partition keys back with hive_partitioning.
func PartitionDir(domain string, endedAt time.Time) (string, error) {
	if err := ValidatePathComponent(domain); err != nil {
		return "", fmt.Errorf("schemas: partition dir: domain: %w", err)
	}
	if endedAt.IsZero() {
		return "", fmt.Errorf("schemas: partition dir: zero time")
	}
	return path.Join("domain="+domain, "date="+endedAt.UTC().Format("2006-01-02")), nil
}

// Partition is a parsed partition directory.
type Partition struct {
	Domain string
	Date   time.Time
}

// ParsePartitionDir parses "domain=<d>/date=<YYYY-MM-DD>" (as PartitionDir writes it), with the
// same strict validation.
func ParsePartitionDir(dir string) (Partition, error) {
	dom, rest, ok := cut(dir, '/')
	if !ok {
		return Partition{}, fmt.Errorf("schemas: partition %q: want domain=<d>/date=<YYYY-MM-DD>", dir)
	}
	d, okd := trimPrefix(dom, "domain=")
	ds, okt := trimPrefix(rest, "date=")
	if !okd || !okt {
		return Partition{}, fmt.Errorf("schemas: partition %q: want domain=<d>/date=<YYYY-MM-DD>", dir)
	}
	if err := ValidatePathComponent(d); err != nil {
		return Partition{}, fmt.Errorf("schemas: partition %q: domain: %w", dir, err)
	}
	t, err := time.Parse("2006-01-02", ds)
	if err != nil {
		return Partition{}, fmt.Errorf("schemas: partition %q: date: %w", dir, err)
	}
	return Partition{Domain: d, Date: t}, nil
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func trimPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}
