// Package uuid makes the random identifiers of the pipeline: trajectory ids (producers,
// tau2-eval) and rollout-request ids (the trainer's admission). They are RFC 4122 version-4
// UUIDs in their canonical 36-character form, which the archive and τ² results files expect.
package uuid

import (
	"crypto/rand"
	"fmt"
)

// New returns a random RFC 4122 version-4 UUID. It draws from crypto/rand, which never fails on
// the platforms Go supports (since Go 1.24 a failure crashes the program rather than returning an
// error), so New has no error to return.
func New() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
