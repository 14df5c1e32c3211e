package archiver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"tau2rl/lib/logs"
	"tau2rl/lib/stream"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
)

// Source is the consumer-group subscription the archiver pulls from (lib/stream/kafka's
// GroupReader in production).
type Source = stream.Source

// DeadLetterer publishes a message the archiver cannot archive (lib/stream/kafka's DeadLetters).
// The archiver commits past the message only after it returns nil.
type DeadLetterer = stream.DeadLetterer

// Deps are the archiver's collaborators. Open fills defaults for nil ones
// where a default exists.
type Deps struct {
	// Source and DeadLetters are required.
	Source      Source
	DeadLetters DeadLetterer
	// Committed returns the group's committed offsets (the next offset
	// to read per partition of the topic); used at start-up to find files
	// written but not committed before a crash. Required.
	Committed func(ctx context.Context) (map[int]int64, error)
	// Topic is the trajectories topic (for matching file offsets at start-up).
	Topic string
	// NewSink opens the Parquet writer (ParquetSink). Required by Open;
	// OpenKafka defaults it.
	NewSink SinkFactory
	// FS is the dataset filesystem; default OSFS.
	FS FS
	// MaxMessageBytes larger messages are dead-lettered without decoding;
	// default kafka.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Metrics and Log; defaults are unregistered metrics and a logger that discards (lib/logs).
	Metrics *Metrics
	Log     *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// CheckGroup, when set, is called every few seconds while running: an error stops the
	// run (another dataset's archiver has the group, see exclusive.go), except a failed
	// query, which is logged. OpenKafka sets it.
	CheckGroup func(ctx context.Context) error

	// unlock releases the dataset lock when OpenKafka took it already.
	unlock func()
}

// Errors that route a message to dead letters, by reason label.
var (
	errOversize = errors.New("message exceeds max_message_bytes")
	errNoTime   = errors.New("trajectory has no ended_at, started_at or message timestamp")
)

// Archiver consumes trajectories and writes the Parquet dataset. See the
// package documentation for the delivery guarantees.
type Archiver struct {
	cfg    Config
	d      Deps
	m      *Metrics
	log    *slog.Logger
	ids    *idSet
	tr     *stream.Watermark
	files  map[string]*openFile
	runID  string
	seq    int
	unlock func()
	// Finalization (footer, fsync, rename, directory fsync) runs on its own
	// goroutine so the loop keeps archiving while the disk syncs; finQ
	// feeds it and finDone returns the results to the loop, which alone
	// touches pending counts and metrics.
	finQ     chan *openFile
	finDone  chan finResult
	inflight int
	Summary  Summary
}

// finResult is the outcome of one background finalization.
type finResult struct {
	f    *openFile
	path string
	size int64
	dur  time.Duration
	err  error
}

// Summary counts what one Run did.
type Summary struct {
	Messages, Archived, Duplicates, DeadLetters int
	Rows, DuplicateRows                         int
	Files                                       int
	FileBytes                                   int64
	// PinnedIDs is how many ids were loaded at start-up from files whose
	// offsets were not committed.
	PinnedIDs int
	// LoadedIDs is how many ids of the newest data files start-up put in
	// the dedup window (at most dedup_window), so that duplicates are
	// dropped across restarts.
	LoadedIDs int
	// RemovedTemp is how many stale temporary files start-up removed.
	RemovedTemp int
}

// Open prepares an archiver: it locks the dataset directory (one archiver
// per dataset), removes temporary files left by a crash, and loads the
// trajectory ids of every file whose offsets the group has not committed,
// so that their redelivery is recognised as duplicates.
func Open(ctx context.Context, cfg Config, d Deps) (_ *Archiver, err error) {
	unlock := d.unlock
	defer func() {
		if err != nil && unlock != nil {
			unlock()
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Source == nil || d.DeadLetters == nil || d.Committed == nil || d.NewSink == nil {
		return nil, errors.New("archiver: Source, DeadLetters, Committed and NewSink are required")
	}
	if d.FS == nil {
		d.FS = OSFS{}
	}
	if d.MaxMessageBytes <= 0 {
		d.MaxMessageBytes = tkafka.DefaultMaxMessageBytes
	}
	if d.Metrics == nil {
		d.Metrics, _ = NewMetrics(nil) // unregistered: cannot fail
	}
	d.Log = logs.OrDiscard(d.Log)
	if d.Now == nil {
		d.Now = time.Now
	}
	if err := d.FS.MkdirAll(cfg.DatasetDir); err != nil {
		return nil, fmt.Errorf("archiver: dataset dir %s: %w", cfg.DatasetDir, err)
	}
	if unlock == nil {
		if unlock, err = lockDir(cfg.DatasetDir); err != nil {
			return nil, err
		}
	}
	var rb [4]byte
	if _, err := rand.Read(rb[:]); err != nil {
		unlock()
		return nil, fmt.Errorf("archiver: run id: %w", err)
	}
	a := &Archiver{
		cfg: cfg, d: d, m: d.Metrics, log: d.Log.With("component", "archiver"),
		ids: newIDSet(cfg.DedupWindow), tr: stream.NewWatermark(stream.RedeliveryTrack), files: map[string]*openFile{},
		runID: hex.EncodeToString(rb[:]), unlock: unlock,
	}
	if err := a.recover(ctx); err != nil {
		unlock()
		return nil, err
	}
	return a, nil
}

// job is one fetched message on its way through the decode workers.
type job struct {
	msg   stream.Message
	trajs []*schemas.Trajectory
	dirs  []string
	err   error
	done  chan struct{}
}

// Run archives until ctx ends (then it finalizes open files, commits and
// returns nil) or a durable write fails (then it discards unfinished files,
// commits only what is durable and returns the error; the uncommitted
// messages are redelivered to the next run).
func (a *Archiver) Run(ctx context.Context) (err error) {
	defer a.unlock()
	fetchCtx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	ordered := make(chan *job, a.cfg.DecodeWorkers*4)
	work := make(chan *job, a.cfg.DecodeWorkers*4)
	fetchErr := make(chan error, 1)
	go a.fetchLoop(fetchCtx, ordered, work, fetchErr)
	for i := 0; i < a.cfg.DecodeWorkers; i++ {
		go a.decodeLoop(work)
	}
	a.finQ = make(chan *openFile, 2)
	a.finDone = make(chan finResult, 2)
	go a.finalizeLoop()
	defer close(a.finQ)
	ticker := time.NewTicker(a.cfg.CommitInterval)
	defer ticker.Stop()
	var groupCheck <-chan time.Time
	if a.d.CheckGroup != nil {
		t := time.NewTicker(groupCheckInterval)
		defer t.Stop()
		groupCheck = t.C
	}
	a.log.Info("archiver running", "dataset_dir", a.cfg.DatasetDir, "group", a.cfg.Group, "topic", a.d.Topic,
		"roll_max_bytes", a.cfg.Roll.MaxBytes, "roll_max_age", a.cfg.Roll.MaxAge, "pinned_ids", a.Summary.PinnedIDs, "loaded_ids", a.Summary.LoadedIDs)
	for {
		select {
		case <-ctx.Done():
			return a.shutdown()
		case err := <-fetchErr:
			return a.fail(fmt.Errorf("archiver: fetch: %w", err))
		case j := <-ordered:
			select {
			case <-j.done:
			case <-ctx.Done():
				return a.shutdown()
			}
			if err := a.handle(ctx, j); err != nil {
				if ctx.Err() != nil {
					return a.shutdown()
				}
				return a.fail(err)
			}
		case r := <-a.finDone:
			if err := a.complete(r); err != nil {
				return a.fail(err)
			}
		case <-groupCheck:
			if err := a.d.CheckGroup(ctx); err != nil {
				if ctx.Err() != nil {
					return a.shutdown()
				}
				if errors.Is(err, errGroupQuery) {
					a.log.Warn("checking the consumer group's members failed; will retry", "err", err)
					continue
				}
				// The data already written is durable and its offsets committable: stop as
				// on a signal, then report why.
				return errors.Join(err, a.shutdown())
			}
		case <-ticker.C:
			if err := a.tick(ctx); err != nil {
				if ctx.Err() != nil {
					return a.shutdown()
				}
				return a.fail(err)
			}
		}
	}
}

func (a *Archiver) fetchLoop(ctx context.Context, ordered, work chan<- *job, errc chan<- error) {
	defer close(work)
	for {
		msg, err := a.d.Source.Fetch(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				errc <- err
			}
			return
		}
		j := &job{msg: msg, done: make(chan struct{})}
		select {
		case work <- j:
		case <-ctx.Done():
			return
		}
		select {
		case ordered <- j:
		case <-ctx.Done():
			return
		}
	}
}

func (a *Archiver) decodeLoop(work <-chan *job) {
	for j := range work {
		j.trajs, j.dirs, j.err = a.decode(j.msg)
		close(j.done)
	}
}

// decode unframes a message and computes the partition directory of each
// trajectory. Any error sends the whole message to dead letters.
func (a *Archiver) decode(msg stream.Message) ([]*schemas.Trajectory, []string, error) {
	if len(msg.Value) > a.d.MaxMessageBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", errOversize, len(msg.Value), a.d.MaxMessageBytes)
	}
	trajs, err := schemas.UnframeTrajectories(msg.Value, stream.HeaderMap(msg))
	if err != nil {
		return nil, nil, err
	}
	dirs := make([]string, len(trajs))
	for i, t := range trajs {
		when := t.EndedAt
		if when.IsZero() {
			when = t.StartedAt
		}
		if when.IsZero() {
			when = msg.Time
		}
		if when.IsZero() {
			return nil, nil, fmt.Errorf("trajectory %s: %w", t.ID, errNoTime)
		}
		dir, err := schemas.PartitionDir(t.Domain, when)
		if err != nil {
			return nil, nil, fmt.Errorf("trajectory %s: %w", t.ID, err)
		}
		dirs[i] = dir
	}
	return trajs, dirs, nil
}

func deadLetterReason(err error) string {
	switch {
	case errors.Is(err, errOversize):
		return "oversize"
	case errors.Is(err, schemas.ErrUnsupportedVersion):
		return "version"
	case errors.Is(err, schemas.ErrUnsafePath):
		return "path"
	case errors.Is(err, schemas.ErrFraming):
		return "framing"
	case errors.Is(err, schemas.ErrInvalid):
		return "invalid"
	default:
		return "decode"
	}
}

// handle records one decoded message: dead letter, duplicate, or rows
// appended to the open file of each partition directory.
func (a *Archiver) handle(ctx context.Context, j *job) error {
	msg := j.msg
	tp := stream.Partition{Topic: msg.Topic, Partition: msg.Partition}
	p := a.tr.Add(tp, msg.Offset, 0)
	a.Summary.Messages++
	a.m.BytesIn.Add(float64(len(msg.Value)))
	if j.err != nil {
		reason := deadLetterReason(j.err)
		a.log.Warn("dead-lettering message", "topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
			"key", string(msg.Key), "reason", reason, "err", j.err)
		if err := a.d.DeadLetters.DeadLetter(ctx, msg, j.err); err != nil {
			a.m.Errors.WithLabelValues("dead_letter").Inc()
			return fmt.Errorf("archiver: dead letter for %s/%d@%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
		}
		a.m.DeadLetters.WithLabelValues(reason).Inc()
		a.m.Messages.WithLabelValues("dead_letter").Inc()
		a.Summary.DeadLetters++
		return nil
	}
	byDir := map[string][]*schemas.Trajectory{}
	var order []string
	seen := map[idKey]bool{}
	dups := 0
	for i, t := range j.trajs {
		k := keyOf(t.ID)
		if seen[k] || a.ids.has(k) {
			dups++
			continue
		}
		seen[k] = true
		if _, ok := byDir[j.dirs[i]]; !ok {
			order = append(order, j.dirs[i])
		}
		byDir[j.dirs[i]] = append(byDir[j.dirs[i]], t)
	}
	a.m.DuplicateRows.Add(float64(dups))
	a.Summary.DuplicateRows += dups
	if len(order) == 0 {
		a.m.Messages.WithLabelValues("duplicate").Inc()
		a.Summary.Duplicates++
		return nil
	}
	for _, dir := range order {
		f, err := a.fileFor(dir)
		if err != nil {
			return err
		}
		if err := f.write(tp, msg.Offset, a.tr, p, byDir[dir], a.cfg.RowGroupBytes); err != nil {
			a.m.Errors.WithLabelValues("write").Inc()
			return err
		}
		for _, t := range byDir[dir] {
			a.ids.add(keyOf(t.ID))
		}
	}
	a.m.Messages.WithLabelValues("archived").Inc()
	a.Summary.Archived++
	for _, dir := range order {
		if f := a.files[dir]; f != nil && f.sink.Size() >= a.cfg.Roll.MaxBytes {
			if err := a.finalize(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileFor returns the open file of dir, opening one (and closing the oldest
// if too many are open).
func (a *Archiver) fileFor(dir string) (*openFile, error) {
	if f := a.files[dir]; f != nil {
		return f, nil
	}
	if len(a.files) >= a.cfg.MaxOpenFiles {
		var oldest *openFile
		for _, f := range a.files {
			if oldest == nil || f.opened.Before(oldest.opened) {
				oldest = f
			}
		}
		if err := a.finalize(oldest); err != nil {
			return nil, err
		}
	}
	now := a.d.Now()
	a.seq++
	name := dataFileName(now, a.runID, a.seq)
	f, err := newOpenFile(a.d.FS, a.d.NewSink, a.cfg.DatasetDir, dir, name, now)
	if err != nil {
		a.m.Errors.WithLabelValues("write").Inc()
		return nil, err
	}
	a.files[dir] = f
	a.m.OpenFiles.Set(float64(len(a.files)))
	return f, nil
}

// finalize hands f to the finalizer goroutine. Its messages are released
// for commit when the result comes back (complete). While the finalizer is
// busy the loop keeps taking results, so the two never wait on each other.
// If an earlier file's finalization fails while f waits for the queue, f is
// discarded too: it is in neither a.files nor the queue, so nothing else
// would remove its temporary file.
func (a *Archiver) finalize(f *openFile) error {
	delete(a.files, f.dir)
	a.m.OpenFiles.Set(float64(len(a.files)))
	for {
		select {
		case a.finQ <- f:
			a.inflight++
			return nil
		case r := <-a.finDone:
			if err := a.complete(r); err != nil {
				if aerr := f.abort(a.d.FS); aerr != nil {
					a.log.Warn("removing temporary file", "path", f.tmpPath, "err", aerr)
				}
				return err
			}
		}
	}
}

// finalizeLoop makes files durable, one at a time, off the loop.
func (a *Archiver) finalizeLoop() {
	for f := range a.finQ {
		start := time.Now()
		path, err := f.finalize(a.d.FS, a.d.Now())
		a.finDone <- finResult{f: f, path: path, size: f.sink.Size(), dur: time.Since(start), err: err}
	}
}

// complete records a finished finalization: on success the file's messages
// may be committed; on failure the run stops.
func (a *Archiver) complete(r finResult) error {
	a.inflight--
	if r.err != nil {
		a.m.Errors.WithLabelValues("finalize").Inc()
		if aerr := r.f.abort(a.d.FS); aerr != nil {
			a.log.Warn("removing temporary file", "path", r.f.tmpPath, "err", aerr)
		}
		return r.err
	}
	a.m.FinalizeLatency.Observe(r.dur.Seconds())
	for _, p := range r.f.entries {
		if err := a.tr.Release(p); err != nil {
			return fmt.Errorf("archiver: %w", err)
		}
	}
	a.m.Files.Inc()
	a.m.Rows.Add(float64(r.f.rows))
	a.m.FileBytes.Add(float64(r.size))
	a.Summary.Files++
	a.Summary.Rows += r.f.rows
	a.Summary.FileBytes += r.size
	a.log.Debug("file finalized", "path", r.path, "rows", r.f.rows, "bytes", r.size, "seconds", r.dur.Seconds())
	return nil
}

// drain waits for every in-flight finalization, returning the first error.
func (a *Archiver) drain() error {
	var errs []error
	for a.inflight > 0 {
		if err := a.complete(<-a.finDone); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tick rolls files by age and commits durable progress.
func (a *Archiver) tick(ctx context.Context) error {
	now := a.d.Now()
	var old []*openFile
	for _, f := range a.files {
		if now.Sub(f.opened) >= a.cfg.Roll.MaxAge {
			old = append(old, f)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].opened.Before(old[j].opened) })
	for _, f := range old {
		if err := a.finalize(f); err != nil {
			return err
		}
	}
	a.commit(ctx)
	return nil
}

// commit commits, per partition, the offset after the durable prefix. A
// failed commit is retried at the next tick: the data is durable, so the
// worst case is a redelivery that the id set drops.
func (a *Archiver) commit(ctx context.Context) {
	commits := a.tr.Advance()
	a.m.Uncommitted.Set(float64(a.tr.Pending()))
	if len(commits) == 0 {
		return
	}
	msgs := make([]stream.Message, 0, len(commits))
	for _, o := range commits {
		msgs = append(msgs, stream.CommitPoint(o.Topic, o.Partition, o.Next))
	}
	start := time.Now()
	if err := a.d.Source.Commit(ctx, msgs...); err != nil {
		a.m.Errors.WithLabelValues("commit").Inc()
		if ctx.Err() == nil {
			a.log.Warn("offset commit failed; will retry", "err", err)
		}
		return
	}
	a.m.CommitLatency.Observe(time.Since(start).Seconds())
	for _, o := range commits {
		a.tr.Committed(o)
	}
}

// shutdown finalizes every open file and commits, on a fresh deadline since
// the run's context has ended.
func (a *Archiver) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, f := range a.sortedFiles() {
		if err := a.finalize(f); err != nil {
			errs = append(errs, err)
		}
	}
	if err := a.drain(); err != nil {
		errs = append(errs, err)
	}
	a.commit(ctx)
	if err := a.d.Source.Close(); err != nil {
		errs = append(errs, err)
	}
	a.log.Info("archiver stopped", "messages", a.Summary.Messages, "rows", a.Summary.Rows, "files", a.Summary.Files,
		"duplicates", a.Summary.DuplicateRows, "dead_letters", a.Summary.DeadLetters)
	return errors.Join(errs...)
}

// fail waits for in-flight finalizations (those that succeed are durable),
// discards unfinished files, commits what is durable and returns err.
func (a *Archiver) fail(err error) error {
	a.log.Error("archiver failed; uncommitted messages will be redelivered", "err", err)
	if derr := a.drain(); derr != nil {
		a.log.Warn("finalization failed during shutdown", "err", derr)
	}
	for _, f := range a.files {
		if aerr := f.abort(a.d.FS); aerr != nil {
			a.log.Warn("removing temporary file", "path", f.tmpPath, "err", aerr)
		}
	}
	a.files = map[string]*openFile{}
	a.m.OpenFiles.Set(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.commit(ctx)
	if cerr := a.d.Source.Close(); cerr != nil {
		a.log.Warn("closing reader", "err", cerr)
	}
	return err
}

func (a *Archiver) sortedFiles() []*openFile {
	out := make([]*openFile, 0, len(a.files))
	for _, f := range a.files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out
}
