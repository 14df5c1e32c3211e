// Package durable writes files so that a crash leaves either the old file or the complete new one,
// never a partial file, and so that a file reported written survives power loss.
//
// The recipe is POSIX's: write into a temporary file in the same directory, fsync it, rename it
// over the target (atomic within one file system), then fsync the directory, because a rename is
// an update of the directory and is only durable once the directory is synced. The temporary file
// is named "."+base+".*.tmp", so dataset readers, which skip "."-prefixed names, never see it.
//
// Every role that publishes a file others read writes it through this package: checkpoints and
// optimizer state (trainer, gpu, gpu/dp's per-rank shards), releases (consumers/release), datasets built in one go
// (schemas/dataset), tau2-eval's results files. The streaming archiver uses SyncDir through its
// own FS seam, so its fault tests can fail each step.
package durable

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// SyncDir fsyncs directory dir, making the creations, renames and removals in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir: %w", err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// Write creates or replaces path with what fill writes, atomically and durably: fill writes
// (through a 1 MiB buffer) into a temporary file in path's directory, which is fsynced, given mode
// perm, renamed to path, and the directory is fsynced. On any error the temporary file is removed
// and path is untouched; errors name path and the step that failed.
func Write(path string, perm fs.FileMode, fill func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := fill(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return SyncDir(dir)
}

// WriteFile is Write for content already in memory.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	})
}
