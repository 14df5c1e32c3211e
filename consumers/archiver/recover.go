package archiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"tau2rl/schemas"

	"github.com/parquet-go/parquet-go"
)

// IDColumn is the top-level Parquet column holding the trajectory id.
const IDColumn = "id"

// lockDir takes an exclusive advisory lock on the dataset directory, so two
// archivers never write (and de-duplicate against) the same dataset.
func lockDir(dir string) (func(), error) {
	p := filepath.Join(dir, ".archiver.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("archiver: lock %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("archiver: dataset %s is locked by another archiver (%s)", dir, p)
		}
		return nil, fmt.Errorf("archiver: lock %s: %w", p, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		})
	}, nil
}

// recover runs at start-up. Temporary files are leftovers of a crash: their
// messages were never committed, so they are removed (the messages come
// again). Finalized files whose recorded offsets reach at or beyond the
// group's committed offset were made durable but not committed: their ids
// are pinned in the id set so the redelivered copies are dropped.
//
// Then the dedup window is refilled from the dataset itself: the ids of the
// newest data files (by the UTC time in their names) up to dedup_window ids
// are remembered, so a trajectory id re-published after a restart (a replay
// re-run, a producer retry) is dropped as it would have been without the
// restart. The files are the index: they are durable before their offsets
// are committed, so the index is crash-safe exactly as the dataset is, and
// there is no second structure to keep consistent.
func (a *Archiver) recover(ctx context.Context) error {
	committed, err := a.d.Committed(ctx)
	if err != nil {
		return fmt.Errorf("archiver: committed offsets of group %s: %w", a.cfg.Group, err)
	}
	var dataFiles []string
	err = a.d.FS.WalkDir(a.cfg.DatasetDir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		switch name := de.Name(); {
		case isTempFile(name):
			if err := a.d.FS.Remove(p); err != nil {
				return fmt.Errorf("remove stale temporary file: %w", err)
			}
			a.Summary.RemovedTemp++
			a.log.Info("removed temporary file of an interrupted run", "path", p)
		case IsDataFile(name):
			dataFiles = append(dataFiles, p)
			n, err := a.pinIfUncommitted(p, committed)
			if err != nil {
				// A visible file the archiver cannot read is not its own
				// (its files are renamed only after fsync); warn and go on.
				a.log.Warn("unreadable dataset file skipped at start-up", "path", p, "err", err)
				a.m.Errors.WithLabelValues("startup_scan").Inc()
				return nil
			}
			a.Summary.PinnedIDs += n
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archiver: start-up scan of %s: %w", a.cfg.DatasetDir, err)
	}
	return a.loadRecentIDs(dataFiles)
}

// loadRecentIDs fills the dedup window with the ids of the newest data
// files, oldest first so that the FIFO window evicts them in archive order.
// File names are part-<UTC time>-<run>-<seq>.parquet, so the base names sort
// in the order the files were opened, across partition directories.
func (a *Archiver) loadRecentIDs(paths []string) error {
	if a.cfg.DedupWindow == 0 || len(paths) == 0 {
		return nil
	}
	sort.Slice(paths, func(i, j int) bool { return filepath.Base(paths[i]) > filepath.Base(paths[j]) })
	var newestFirst [][]string
	total := 0
	for _, p := range paths {
		if total >= a.cfg.DedupWindow {
			break
		}
		f, pf, err := openParquet(a.d.FS, p)
		if err != nil {
			a.log.Warn("unreadable dataset file skipped when loading recent ids", "path", p, "err", err)
			a.m.Errors.WithLabelValues("startup_scan").Inc()
			continue
		}
		ids, err := ReadIDs(pf)
		f.Close()
		if err != nil {
			a.log.Warn("unreadable dataset file skipped when loading recent ids", "path", p, "err", err)
			a.m.Errors.WithLabelValues("startup_scan").Inc()
			continue
		}
		newestFirst = append(newestFirst, ids)
		total += len(ids)
	}
	for i := len(newestFirst) - 1; i >= 0; i-- {
		for _, id := range newestFirst[i] {
			a.ids.add(keyOf(id))
		}
	}
	a.Summary.LoadedIDs = min(total, a.cfg.DedupWindow)
	return nil
}

// pinIfUncommitted pins the ids of the file at p when any of its offset
// ranges for the archiver's topic is not below the committed offset.
func (a *Archiver) pinIfUncommitted(p string, committed map[int]int64) (int, error) {
	f, pf, err := openParquet(a.d.FS, p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	meta, ok := pf.Lookup(schemas.MetaKafkaOffsets)
	if !ok {
		return 0, nil // not an archiver file (e.g. a copied release): no offsets to compare
	}
	ranges, err := schemas.ParseOffsets(meta)
	if err != nil {
		return 0, err
	}
	uncommitted := false
	for _, r := range ranges {
		if r.Topic != a.d.Topic {
			continue
		}
		next, ok := committed[r.Partition]
		if !ok || r.Last >= next {
			uncommitted = true
		}
	}
	if !uncommitted {
		return 0, nil
	}
	ids, err := ReadIDs(pf)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		a.ids.pin(keyOf(id))
	}
	a.log.Info("file not yet committed: its ids will de-duplicate redelivery", "path", p, "ids", len(ids))
	return len(ids), nil
}

func openParquet(fsys FS, p string) (ReadFile, *parquet.File, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open parquet %s: %w", p, err)
	}
	return f, pf, nil
}

// ReadIDs reads the trajectory id column of a Parquet file without decoding
// whole rows.
func ReadIDs(pf *parquet.File) ([]string, error) {
	col := pf.Root().Column(IDColumn)
	if col == nil || !col.Leaf() {
		return nil, fmt.Errorf("no top-level %q column", IDColumn)
	}
	pages := col.Pages()
	defer pages.Close()
	ids := make([]string, 0, pf.NumRows())
	buf := make([]parquet.Value, 256)
	for {
		page, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %q page: %w", IDColumn, err)
		}
		vr := page.Values()
		for {
			n, err := vr.ReadValues(buf)
			for _, v := range buf[:n] {
				ids = append(ids, string(v.ByteArray()))
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				parquet.Release(page)
				return nil, fmt.Errorf("read %q values: %w", IDColumn, err)
			}
		}
		parquet.Release(page)
	}
	if int64(len(ids)) != pf.NumRows() {
		return nil, fmt.Errorf("%q column has %d values for %d rows", IDColumn, len(ids), pf.NumRows())
	}
	return ids, nil
}
