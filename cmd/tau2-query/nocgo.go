//go:build !cgo

// Command tau2-query needs cgo (DuckDB is a C++ library); this build was made without it.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "tau2-query: built without cgo, so without DuckDB: rebuild with CGO_ENABLED=1 and a C compiler (go build ./cmd/tau2-query)")
	os.Exit(1)
}
