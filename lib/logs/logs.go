// Package logs holds the project's one default-logger rule: a nil *slog.Logger discards.
//
// Libraries take their logger from the caller (a Deps or Options field, or a parameter) and
// never reach for slog.Default(): the binaries pass the logger cmd/internal/cli configured
// (level, format, redaction), so what a library logs is visible in a binary because the binary
// asked for it, and a test or a tool that passes nil gets silence rather than output on stderr.
// Every constructor or entry point that accepts a logger applies OrDiscard once, so a nil logger
// is never dereferenced.
package logs

import "log/slog"

// OrDiscard returns l, or a logger that discards everything when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
