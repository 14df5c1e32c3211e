package schemas

import (
	"fmt"
	"strconv"
	"strings"
)

// Schema version of the trajectory contract, "major.minor".
//
// Evolution rules (enforced by the decoders and tested with golden files):
//   - A minor bump only adds optional columns (top level or inside nested structs) or a value of
//     the open status set (from 1.1: a reader accepts a status it does not know — a lower-case
//     word with an error message — and treats it as not a reward; 1.0 readers, which predate
//     the rule, dead-letter it). A reader of
//     minor N accepts any N+k of the same major: columns it does not know are ignored, and
//     optional columns missing from older data decode as zero values.
//   - Anything else (removing or renaming a column, changing a type or a meaning) is a major bump.
//     A reader rejects an unknown major with a *VersionError wrapping ErrUnsupportedVersion, which
//     consumers route to dead letters rather than guessing.
const (
	SchemaMajor = 1
	SchemaMinor = 1
)

// SchemaVersion is the version this build writes, "1.1".
//
// History: 1.0 the initial contract; 1.1 adds the status value "not_evaluated" (StatusNotEvaluated)
// and makes status an open set: readers treat any status other than "ok" as not a reward.
var SchemaVersion = FormatVersion(SchemaMajor, SchemaMinor)

// MetadataKeyVersion is the key of the schema version in Arrow schema metadata and Parquet
// key-value metadata.
const MetadataKeyVersion = "tau2rl.schema_version"

// VersionError says that data carries a schema version this reader cannot decode (unknown major
// or unparsable). errors.Is(err, ErrUnsupportedVersion) holds for it.
type VersionError struct {
	// Got is the version string found in the data ("" when absent).
	Got string
	// Where names what carried it (arrow metadata, kafka header, parquet metadata).
	Where string
	// Reason explains why it is rejected.
	Reason string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("schemas: %s: schema version %q: %s (this reader supports %d.x, writes %s)", e.Where, e.Got, e.Reason, SchemaMajor, SchemaVersion)
}

// Is makes errors.Is(err, ErrUnsupportedVersion) true.
func (e *VersionError) Is(target error) bool { return target == ErrUnsupportedVersion }

// FormatVersion renders "major.minor".
func FormatVersion(major, minor int) string {
	return strconv.Itoa(major) + "." + strconv.Itoa(minor)
}

// ParseVersion parses "major.minor" (non-negative decimal integers).
func ParseVersion(s string) (major, minor int, err error) {
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		return 0, 0, fmt.Errorf("want major.minor")
	}
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || major < 0 || minor < 0 || a[0] == '+' || b[0] == '+' {
		return 0, 0, fmt.Errorf("want major.minor with non-negative integers")
	}
	return major, minor, nil
}

// CheckVersion accepts any version with this build's major and returns the minor; anything else
// is a *VersionError naming where it came from.
func CheckVersion(got, where string) (minor int, err error) {
	if got == "" {
		return 0, &VersionError{Got: got, Where: where, Reason: "missing"}
	}
	major, minor, perr := ParseVersion(got)
	if perr != nil {
		return 0, &VersionError{Got: got, Where: where, Reason: perr.Error()}
	}
	if major != SchemaMajor {
		return 0, &VersionError{Got: got, Where: where, Reason: fmt.Sprintf("unknown major %d", major)}
	}
	return minor, nil
}
