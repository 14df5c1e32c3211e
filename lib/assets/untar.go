package assets

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// untar streams a gzip-compressed tar and hands the entries named in want (after stripping the
// top directory and s.Strip, and prefixing s.Dest) to write. Other entries, links and anything
// that is not a regular file are skipped; paths are cleaned, so an entry cannot escape the root.
func untar(r io.Reader, s Source, want map[string]File, write func(rel string, r io.Reader) error) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%s: not gzip: %w", s.URL, err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: tar: %w", s.URL, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		_, rest, ok := strings.Cut(name, "/") // GitHub's top directory, <repo>-<sha>/
		if !ok {
			continue
		}
		rel, ok := strings.CutPrefix(rest, s.Strip)
		if !ok {
			continue
		}
		rel = path.Join(s.Dest, rel)
		if _, ok := want[rel]; !ok {
			continue
		}
		if err := write(rel, tr); err != nil {
			return err
		}
	}
}
