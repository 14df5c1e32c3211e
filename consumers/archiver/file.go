package archiver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"tau2rl/lib/stream"
	"tau2rl/schemas"
)

// Sink writes trajectories into one Parquet file. The archiver owns the
// file (temporary name, fsync, rename); the sink owns the format. It is
// schemas' Parquet writer behind a small interface so that the archiver's
// durability logic is tested with the real format and with injected
// failures alike.
type Sink interface {
	// Write appends rows.
	Write(trajs []*schemas.Trajectory) error
	// Flush ends the current row group (bounding buffered memory).
	Flush() error
	// SetKeyValueMetadata sets a footer key-value pair (before Close).
	SetKeyValueMetadata(key, value string)
	// Size estimates the file size so far, buffered rows included.
	Size() int64
	// Close writes the footer. It does not close the underlying writer.
	Close() error
}

// SinkFactory opens a Sink writing to w.
type SinkFactory func(w io.Writer) (Sink, error)

// Naming: final files are part-<UTC time>-<run>-<seq>.parquet; the
// temporary name while writing is "." + final + ".tmp", which every reader
// (DuckDB globs of *.parquet, the dataset reader, releases) ignores.
//
// The time has milliseconds because start-up orders files by name to find
// the newest (loadRecentIDs): with whole seconds, a run that started in the
// same second its predecessor wrote its last file sorted by the random run
// id, so the predecessor's files could pass for the newest ones.
const (
	fileTimeLayout = "20060102T150405.000Z"
	filePrefix     = "part-"
	fileSuffix     = ".parquet"
	tmpSuffix      = ".tmp"
)

// dataFileName is the final base name of the seq-th file a run opens at now.
func dataFileName(now time.Time, run string, seq int) string {
	return fmt.Sprintf("%s%s-%s-%06d%s", filePrefix, now.UTC().Format(fileTimeLayout), run, seq, fileSuffix)
}

// IsDataFile reports whether name (a base name) is a finalized data file.
func IsDataFile(name string) bool {
	return strings.HasPrefix(name, filePrefix) && strings.HasSuffix(name, fileSuffix)
}

// isTempFile reports whether name is an archiver temporary file.
func isTempFile(name string) bool {
	return strings.HasPrefix(name, "."+filePrefix) && strings.HasSuffix(name, fileSuffix+tmpSuffix)
}

// openFile is one Parquet file being written for one partition directory.
type openFile struct {
	dir      string // relative partition dir, e.g. domain=airline/date=2026-11-21
	name     string // final base name
	absDir   string
	tmpPath  string
	opened   time.Time
	f        File
	buf      *bufio.Writer
	sink     Sink
	rows     int
	flushed  int64            // sink size at the last row-group flush
	entries  []*stream.Ticket // one hold each on the messages with rows here
	ranges   map[stream.Partition]*schemas.OffsetRange
	lastSeen map[stream.Partition]int64 // last offset counted in ranges, per partition
}

func newOpenFile(fsys FS, newSink SinkFactory, root, dir, name string, now time.Time) (*openFile, error) {
	absDir := filepath.Join(root, filepath.FromSlash(dir))
	if err := fsys.MkdirAll(absDir); err != nil {
		return nil, fmt.Errorf("archiver: mkdir %s: %w", absDir, err)
	}
	tmp := filepath.Join(absDir, "."+name+tmpSuffix)
	f, err := fsys.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("archiver: create %s: %w", tmp, err)
	}
	buf := bufio.NewWriterSize(f, 1<<20)
	sink, err := newSink(buf)
	if err != nil {
		f.Close()
		fsys.Remove(tmp)
		return nil, fmt.Errorf("archiver: open parquet writer for %s: %w", tmp, err)
	}
	return &openFile{
		dir: dir, name: name, absDir: absDir, tmpPath: tmp, opened: now, f: f, buf: buf, sink: sink,
		ranges: map[stream.Partition]*schemas.OffsetRange{}, lastSeen: map[stream.Partition]int64{},
	}, nil
}

// write appends the rows of one message and records its offset; the message is held on wm until
// this file is durable.
func (o *openFile) write(tp stream.Partition, offset int64, wm *stream.Watermark, p *stream.Ticket, trajs []*schemas.Trajectory, rowGroupBytes int64) error {
	if err := o.sink.Write(trajs); err != nil {
		return fmt.Errorf("archiver: write %s: %w", o.tmpPath, err)
	}
	o.rows += len(trajs)
	wm.Hold(p)
	o.entries = append(o.entries, p)
	r := o.ranges[tp]
	if r == nil {
		r = &schemas.OffsetRange{Topic: tp.Topic, Partition: tp.Partition, First: offset, Last: offset}
		o.ranges[tp] = r
	}
	r.First = min(r.First, offset)
	r.Last = max(r.Last, offset)
	if last, ok := o.lastSeen[tp]; !ok || last != offset {
		r.Messages++
		o.lastSeen[tp] = offset
	}
	if size := o.sink.Size(); size-o.flushed >= rowGroupBytes {
		if err := o.sink.Flush(); err != nil {
			return fmt.Errorf("archiver: flush row group of %s: %w", o.tmpPath, err)
		}
		o.flushed = o.sink.Size()
	}
	return nil
}

func (o *openFile) offsetRanges() []schemas.OffsetRange {
	out := make([]schemas.OffsetRange, 0, len(o.ranges))
	for _, r := range o.ranges {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// finalize makes the file durable and visible: footer, flush, fsync, close,
// rename to the final name, fsync of the directory. Only after it returns
// nil may the offsets of its rows be committed. It returns the final path.
func (o *openFile) finalize(fsys FS, now time.Time) (string, error) {
	offsets, err := json.Marshal(o.offsetRanges())
	if err != nil {
		return "", fmt.Errorf("archiver: encode offsets of %s: %w", o.tmpPath, err)
	}
	o.sink.SetKeyValueMetadata(schemas.MetaKafkaOffsets, string(offsets))
	o.sink.SetKeyValueMetadata(schemas.MetaRows, strconv.Itoa(o.rows))
	o.sink.SetKeyValueMetadata(schemas.MetaWriter, version)
	o.sink.SetKeyValueMetadata(schemas.MetaCreated, now.UTC().Format(time.RFC3339Nano))
	steps := []struct {
		what string
		fn   func() error
	}{
		{"write footer", o.sink.Close},
		{"flush", o.buf.Flush},
		{"fsync", o.f.Sync},
		{"close", o.f.Close},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			o.f.Close()
			return "", fmt.Errorf("archiver: %s %s: %w", s.what, o.tmpPath, err)
		}
	}
	final := filepath.Join(o.absDir, o.name)
	if err := fsys.Rename(o.tmpPath, final); err != nil {
		return "", fmt.Errorf("archiver: rename %s: %w", o.tmpPath, err)
	}
	if err := fsys.SyncDir(o.absDir); err != nil {
		return "", fmt.Errorf("archiver: %w", err)
	}
	return final, nil
}

// abort discards the temporary file (its messages are not committed and will
// be redelivered).
func (o *openFile) abort(fsys FS) error {
	errc := o.f.Close()
	if errors.Is(errc, os.ErrClosed) {
		errc = nil
	}
	errr := fsys.Remove(o.tmpPath)
	if errors.Is(errr, os.ErrNotExist) {
		errr = nil
	}
	return errors.Join(errc, errr)
}
