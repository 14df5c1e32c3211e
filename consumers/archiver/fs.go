package archiver

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"tau2rl/lib/durable"
)

// FS is the file-writing seam of the archiver: everything it does to the
// dataset directory goes through it. OSFS is the real one; tests inject
// failures (a full disk, a failing fsync) here.
type FS interface {
	// MkdirAll creates a directory and its parents.
	MkdirAll(path string) error
	// Create creates (truncating) a file for writing.
	Create(path string) (File, error)
	// Rename atomically replaces newpath with oldpath.
	Rename(oldpath, newpath string) error
	// Remove removes a file.
	Remove(path string) error
	// SyncDir fsyncs a directory, making renames and creations in it durable.
	SyncDir(path string) error
	// WalkDir walks a tree as filepath.WalkDir does.
	WalkDir(root string, fn fs.WalkDirFunc) error
	// Open opens a file for reading (footers and id columns at start-up).
	Open(path string) (ReadFile, error)
}

// File is a file being written.
type File interface {
	io.Writer
	Sync() error
	Close() error
}

// ReadFile is a file being read.
type ReadFile interface {
	io.ReaderAt
	io.Closer
	Stat() (fs.FileInfo, error)
}

// OSFS is the FS of the operating system.
type OSFS struct{}

// MkdirAll implements FS.
func (OSFS) MkdirAll(path string) error { return os.MkdirAll(path, 0o755) }

// Create implements FS.
func (OSFS) Create(path string) (File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Rename implements FS.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OSFS) Remove(path string) error { return os.Remove(path) }

// SyncDir implements FS.
func (OSFS) SyncDir(path string) error { return durable.SyncDir(path) }

// WalkDir implements FS.
func (OSFS) WalkDir(root string, fn fs.WalkDirFunc) error { return filepath.WalkDir(root, fn) }

// Open implements FS.
func (OSFS) Open(path string) (ReadFile, error) { return os.Open(path) }
