package schemas

import "errors"

// The errors of this package, matched with errors.Is; each is wrapped with what was wrong and
// where. Consumers route what wraps them to dead letters, never drop it:
//
//   - ErrFraming: a message's headers are not a trajectory frame.
//   - ErrUnsupportedVersion: a schema version this reader cannot decode (every *VersionError,
//     which errors.As gives with the version found).
//   - ErrCorrupt: an Arrow payload that does not decode.
//   - ErrInvalid: a trajectory that decodes but breaks the contract (Validate).
//   - ErrUnsafePath: a value that cannot be a partition directory name.
var (
	// ErrFraming is wrapped by Unframe errors about headers (wrong content type or message type,
	// missing headers); version problems are *VersionError instead.
	ErrFraming = errors.New("bad framing")

	// ErrUnsupportedVersion is wrapped by every *VersionError.
	ErrUnsupportedVersion = errors.New("unsupported schema version")

	// ErrCorrupt is wrapped by DecodeBatch errors about malformed payloads (bad IPC framing, wrong
	// column types, inconsistent offsets), as opposed to *VersionError.
	ErrCorrupt = errors.New("corrupt trajectory batch")

	// ErrInvalid is wrapped by every error Validate returns, so callers can route malformed
	// trajectories (e.g. to dead letters) with errors.Is.
	ErrInvalid = errors.New("invalid trajectory")

	// ErrUnsafePath is wrapped by ValidatePathComponent errors.
	ErrUnsafePath = errors.New("unsafe path component")
)
