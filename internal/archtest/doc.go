// Package archtest holds the tests that keep the layout of docs/ARCHITECTURE.md true: which rooms
// of the repository may import which (the "Rooms" table, read from the document itself, so the
// table cannot drift from the code without a failing test), and that every library package says
// what it is for in a package doc comment. It has no code of its own; `go test ./internal/archtest`
// runs the checks (they shell out to `go list`, so the go command must be on PATH).
package archtest
