// Command gencolumns writes consumers/release/columns_gen.go from the doc
// comments of the schemas package (run by `go generate ./consumers/release`).
package main

import (
	"fmt"
	"go/format"
	"os"

	"tau2rl/consumers/release/internal/coldoc"
)

func main() {
	cols, err := coldoc.Extract("../../schemas")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	src, err := format.Source(coldoc.GoSource(cols))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencolumns:", err)
		os.Exit(1)
	}
	if err := os.WriteFile("columns_gen.go", src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gencolumns:", err)
		os.Exit(1)
	}
}
