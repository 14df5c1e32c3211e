package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"tau2rl/lib/logs"
	"tau2rl/lib/stream"
)

// GroupReader consumes topics as a member of a consumer group with explicit
// commits: Fetch hands out messages, and nothing is committed until the
// caller calls Commit for work that is durable. A crash therefore redelivers
// (at-least-once) and never skips. It also keeps the per-partition lag
// gauge current and, when the metrics are registered, exports the group's
// broker-side lag (tau2rl_kafka_group_lag) for every topic it reads.
//
// # Commits are fenced by the group generation
//
// The reader runs the group protocol itself (kafka-go's ConsumerGroup, one
// partition reader per assigned partition) rather than through kafka-go's
// group Reader, because a commit has to be judged against the generation it
// is sent in. A member that was paused (SIGSTOP, a long GC, a stalled disk)
// is removed from the group while its commits wait; when it resumes it
// rejoins, and a commit held from before — retried by the caller, as the
// archiver does — would otherwise land in the new generation and move
// offsets backwards, on partitions the member no longer owns as well (the
// other member's progress redelivered, a false Tau2PartitionStalled). So
// Commit sends, in the generation current when it is sent, only:
//
//   - partitions that generation assigns to this member (a commit for a
//     revoked partition is dropped: its new owner commits it), and
//   - offsets at or above the partition's floor: the group's committed offset
//     when the partition was assigned, raised by every commit of this member
//     since (a lower one would move the group back, and is dropped).
//
// The broker rejects a commit of a generation that has ended (the member was
// removed or a rebalance started), so the check and the commit cannot be
// separated by a rebalance. Messages fetched in an ended generation are not
// handed out: the partition's next owner reads them from the committed
// offset.
//
// A partition the group has never committed starts at kafka.reader.start_offset,
// resolved to an offset when assigned and committed at once, so the group
// has a position from the start: its lag (tau2rl_kafka_group_lag,
// kafka-consumer-groups.sh) counts from where it started rather than from
// offset 0, and a restart before the first commit of work resumes there
// instead of re-resolving "latest" past messages produced meanwhile.
type GroupReader struct {
	cg     *kafkago.ConsumerGroup
	group  string
	topics []string
	cfg    Config
	dialer *kafkago.Dialer
	admin  *Admin
	m      *Metrics
	log    *slog.Logger
	msgs   chan fetched
	lags   []*GroupLag

	mu      sync.Mutex
	cur     *generation   // nil between generations
	changed chan struct{} // closed (and replaced) whenever cur changes
	closed  chan struct{}
	done    chan struct{} // closed when the run loop has returned
	once    sync.Once

	commitMu sync.Mutex // one commit at a time, so floors only rise
}

// generation is one group generation as this member sees it.
type generation struct {
	gen *kafkago.Generation
	// floor is, per owned partition, the lowest offset a commit may set:
	// the committed (or resolved start) offset at assignment, raised by
	// each commit. Guarded by GroupReader.mu.
	floor map[stream.Partition]int64
}

// fetched is a message tagged with the generation that fetched it.
type fetched struct {
	msg kafkago.Message
	gen int32
}

// NewGroupReader joins group on topics. m may be nil.
func NewGroupReader(cfg Config, group string, topics []string, m *Metrics) (*GroupReader, error) {
	return newGroupReader(cfg, group, topics, m, nil)
}

// newGroupReader joins with balancers (nil: kafka-go's defaults, range and round robin).
func newGroupReader(cfg Config, group string, topics []string, m *Metrics, balancers []kafkago.GroupBalancer) (*GroupReader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if group == "" {
		return nil, errors.New("kafka reader: group id is required (explicit commits need a consumer group)")
	}
	if len(topics) == 0 {
		return nil, errors.New("kafka reader: no topics")
	}
	for _, t := range topics {
		if err := validTopicName(t); err != nil {
			return nil, fmt.Errorf("kafka reader: %w", err)
		}
	}
	conn, err := newConnection(&cfg)
	if err != nil {
		return nil, err
	}
	admin, err := NewAdmin(cfg)
	if err != nil {
		return nil, err
	}
	start := kafkago.FirstOffset
	if cfg.Reader.StartOffset == "latest" {
		start = kafkago.LastOffset
	}
	gc := kafkago.ConsumerGroupConfig{
		ID:                     group,
		Brokers:                cfg.Brokers,
		Dialer:                 conn.dialer,
		Topics:                 topics,
		HeartbeatInterval:      cfg.Reader.HeartbeatInterval,
		SessionTimeout:         cfg.Reader.SessionTimeout,
		RebalanceTimeout:       cfg.Reader.SessionTimeout,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 10 * time.Second,
		StartOffset:            start,
		Timeout:                cfg.DialTimeout,
		GroupBalancers:         balancers,
	}
	if cfg.Log != nil {
		gc.Logger = logFunc(cfg.Log, slog.LevelDebug, group)
		gc.ErrorLogger = logFunc(cfg.Log, slog.LevelWarn, group)
	}
	cg, err := kafkago.NewConsumerGroup(gc)
	if err != nil {
		return nil, fmt.Errorf("kafka reader: %w", err)
	}
	g := &GroupReader{
		cg: cg, group: group, topics: topics, cfg: cfg, dialer: conn.dialer, admin: admin,
		m: m.orNop(), log: logs.OrDiscard(cfg.Log).With("group", group),
		msgs:    make(chan fetched, max(cfg.Reader.QueueCapacity, 1)),
		changed: make(chan struct{}), closed: make(chan struct{}), done: make(chan struct{}),
	}
	if m != nil && m.groupLag != nil {
		for _, t := range topics {
			gl := newGroupLag(admin, group, t, cfg.Log)
			m.groupLag.add(gl)
			g.lags = append(g.lags, gl)
		}
	}
	go g.run()
	return g, nil
}

// logFunc adapts slog to kafka-go's printf-style Logger.
func logFunc(l *slog.Logger, level slog.Level, who string) kafkago.LoggerFunc {
	return func(format string, args ...any) {
		l.Log(context.Background(), level, "kafka-go: "+fmt.Sprintf(format, args...), "client", who)
	}
}

// Group is the consumer group id.
func (g *GroupReader) Group() string { return g.group }

// run joins generation after generation until Close.
func (g *GroupReader) run() {
	defer close(g.done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-g.closed
		cancel()
	}()
	for {
		gen, err := g.cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafkago.ErrGroupClosed) {
				return
			}
			// kafka-go backs off before its next join attempt.
			g.m.Errors.WithLabelValues("", "join").Inc()
			g.log.Warn("kafka reader: joining the consumer group failed; retrying", "err", err)
			continue
		}
		g.startGeneration(ctx, gen)
	}
}

// startGeneration resolves the start offsets of the partitions gen assigns,
// records the generation and starts one reader per partition.
func (g *GroupReader) startGeneration(ctx context.Context, gen *kafkago.Generation) {
	cur := &generation{gen: gen, floor: map[stream.Partition]int64{}}
	starts := map[stream.Partition]int64{}
	resolve := map[string]map[int]int64{}
	for topic, parts := range gen.Assignments {
		for _, pa := range parts {
			tp := stream.Partition{Topic: topic, Partition: pa.ID}
			starts[tp] = pa.Offset
			if pa.Offset >= 0 {
				cur.floor[tp] = pa.Offset
				continue
			}
			off, err := g.resolveStart(ctx, topic, pa.ID, pa.Offset)
			if err != nil {
				// The partition reader resolves the sentinel itself; the floor stays
				// at 0 until the first commit.
				g.log.Warn("kafka reader: resolving the start offset failed", "topic", topic, "partition", pa.ID, "err", err)
				cur.floor[tp] = 0
				continue
			}
			starts[tp], cur.floor[tp] = off, off
			if resolve[topic] == nil {
				resolve[topic] = map[int]int64{}
			}
			resolve[topic][pa.ID] = off
		}
	}
	if len(resolve) > 0 {
		// Give the group a position where it never committed (see the type's comment). A
		// failure only leaves the group without one, as before: the member still reads
		// from the resolved offset.
		if err := gen.CommitOffsets(resolve); err != nil {
			g.log.Warn("kafka reader: committing the start offsets failed", "offsets", resolve, "err", err)
		}
	}
	g.mu.Lock()
	g.cur = cur
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	g.log.Debug("kafka reader: joined generation", "generation", gen.ID, "member", gen.MemberID, "assigned", starts)
	gen.Start(func(gctx context.Context) {
		<-gctx.Done()
		g.mu.Lock()
		if g.cur == cur {
			g.cur = nil
			close(g.changed)
			g.changed = make(chan struct{})
		}
		g.mu.Unlock()
	})
	perPartition := max(g.cfg.Reader.QueueCapacity/max(len(starts), 1), 1)
	for tp, off := range starts {
		gen.Start(func(gctx context.Context) { g.readPartition(gctx, gen.ID, tp, off, perPartition) })
	}
}

// resolveStart turns kafka-go's FirstOffset/LastOffset sentinel into an offset.
func (g *GroupReader) resolveStart(ctx context.Context, topic string, partition int, sentinel int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*g.cfg.DialTimeout)
	defer cancel()
	req := kafkago.FirstOffsetOf(partition)
	if sentinel == kafkago.LastOffset {
		req = kafkago.LastOffsetOf(partition)
	}
	resp, err := g.admin.c.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: {req}}})
	if err != nil {
		return 0, err
	}
	for _, po := range resp.Topics[topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return 0, po.Error
		}
		if sentinel == kafkago.LastOffset {
			return po.LastOffset, nil
		}
		return po.FirstOffset, nil
	}
	return 0, fmt.Errorf("list offsets %s/%d: no answer for the partition", topic, partition)
}

// readPartition reads one assigned partition from offset until the
// generation ends, handing messages to Fetch tagged with the generation.
// It must return only when ctx ends: a function started on a generation
// that returns ends the generation.
func (g *GroupReader) readPartition(ctx context.Context, genID int32, tp stream.Partition, offset int64, queue int) {
	rc := kafkago.ReaderConfig{
		Brokers:        g.cfg.Brokers,
		Topic:          tp.Topic,
		Partition:      tp.Partition,
		Dialer:         g.dialer,
		QueueCapacity:  queue,
		MinBytes:       1,
		MaxBytes:       g.cfg.Reader.FetchMaxBytes,
		MaxWait:        g.cfg.Reader.MaxWait,
		ReadBackoffMin: 100 * time.Millisecond,
		ReadBackoffMax: 2 * time.Second,
		// Lag comes from each message's high watermark (see Fetch).
		ReadLagInterval: -1,
		IsolationLevel:  kafkago.ReadUncommitted,
		MaxAttempts:     10,
	}
	if g.cfg.Log != nil {
		rc.Logger = logFunc(g.cfg.Log, slog.LevelDebug, g.group)
		rc.ErrorLogger = logFunc(g.cfg.Log, slog.LevelWarn, g.group)
	}
	r := kafkago.NewReader(rc)
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		g.log.Error("kafka reader: set offset", "topic", tp.Topic, "partition", tp.Partition, "offset", offset, "err", err)
		<-ctx.Done()
		return
	}
	for {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			g.m.Errors.WithLabelValues(tp.Topic, "fetch").Inc()
			g.log.Warn("kafka reader: fetch", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		select {
		case g.msgs <- fetched{msg: msg, gen: genID}:
		case <-ctx.Done():
			return
		}
	}
}

// current reports whether genID is the generation in force.
func (g *GroupReader) current(genID int32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur != nil && g.cur.gen.ID == genID
}

// Fetch returns the next message without committing it. It blocks until a
// message arrives, ctx ends (ctx.Err() is returned), or the reader is closed
// (io.EOF).
func (g *GroupReader) Fetch(ctx context.Context) (Message, error) {
	for {
		var f fetched
		select {
		case f = <-g.msgs:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		case <-g.closed:
			return Message{}, io.EOF
		}
		if !g.current(f.gen) {
			continue // fetched in an ended generation: the partition's owner reads it again
		}
		msg := f.msg
		g.m.MessagesIn.WithLabelValues(msg.Topic).Inc()
		g.m.BytesIn.WithLabelValues(msg.Topic).Add(float64(len(msg.Key) + len(msg.Value)))
		if msg.HighWaterMark > 0 {
			lag := max(msg.HighWaterMark-msg.Offset-1, 0)
			g.m.Lag.WithLabelValues(g.group, msg.Topic, strconv.Itoa(msg.Partition)).Set(float64(lag))
		}
		return fromKafka(msg), nil
	}
}

// errReaderClosed is returned by Commit after Close.
var errReaderClosed = errors.New("reader closed")

// waitGeneration returns the generation in force, waiting for the group to
// finish a rebalance when there is none.
func (g *GroupReader) waitGeneration(ctx context.Context) (*generation, error) {
	for {
		g.mu.Lock()
		cur, changed := g.cur, g.changed
		g.mu.Unlock()
		if cur != nil {
			return cur, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the group to finish a rebalance: %w", ctx.Err())
		case <-g.closed:
			return nil, errReaderClosed
		}
	}
}

// Commit stores, for each topic-partition in msgs, the offset after the
// highest message given: everything up to it counts as processed. Call it
// only for work that is durable. It is synchronous, and fenced by the group
// generation (see the type's comment): partitions this member no longer owns
// and offsets below the group's are left alone (logged and counted as
// tau2rl_kafka_errors_total{op="commit_dropped"}), which is not an error —
// the work is redelivered to, or already done by, the partition's owner.
// During a rebalance it waits for the next generation; a commit the broker
// rejects is judged again in the generation that follows.
func (g *GroupReader) Commit(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	want := map[stream.Partition]int64{}
	for _, m := range msgs {
		tp := stream.Partition{Topic: m.Topic, Partition: m.Partition}
		if next, ok := want[tp]; !ok || m.Offset+1 > next {
			want[tp] = m.Offset + 1
		}
	}
	topic := msgs[0].Topic
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	start := time.Now()
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		cur, err := g.waitGeneration(ctx)
		if err != nil {
			g.m.Errors.WithLabelValues(topic, "commit").Inc()
			if lastErr != nil {
				err = fmt.Errorf("%w (after %v)", err, lastErr)
			}
			return fmt.Errorf("kafka reader %s: commit: %w", g.group, err)
		}
		offsets := g.plan(cur, want)
		if len(offsets) == 0 {
			return nil
		}
		err = cur.gen.CommitOffsets(offsets)
		if err == nil {
			g.mu.Lock()
			for t, ps := range offsets {
				for p, next := range ps {
					tp := stream.Partition{Topic: t, Partition: p}
					cur.floor[tp] = max(cur.floor[tp], next)
				}
			}
			g.mu.Unlock()
			g.m.Latency.WithLabelValues(topic, "commit").Observe(time.Since(start).Seconds())
			return nil
		}
		lastErr = err
		g.log.Debug("kafka reader: commit rejected; judging it again", "generation", cur.gen.ID, "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			g.m.Errors.WithLabelValues(topic, "commit").Inc()
			return fmt.Errorf("kafka reader %s: commit: %w", g.group, lastErr)
		case <-g.closed:
			g.m.Errors.WithLabelValues(topic, "commit").Inc()
			return fmt.Errorf("kafka reader %s: commit: %w", g.group, lastErr)
		case <-time.After(min(100*time.Millisecond<<attempt, 2*time.Second)):
		}
	}
	g.m.Errors.WithLabelValues(topic, "commit").Inc()
	return fmt.Errorf("kafka reader %s: commit: %w", g.group, lastErr)
}

// plan keeps the part of want that cur may commit: owned partitions, at or
// above their floor. Equal offsets are left out (nothing to move).
func (g *GroupReader) plan(cur *generation, want map[stream.Partition]int64) map[string]map[int]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]map[int]int64{}
	for tp, next := range want {
		floor, owned := cur.floor[tp]
		switch {
		case !owned:
			g.m.Errors.WithLabelValues(tp.Topic, "commit_dropped").Inc()
			g.log.Info("kafka reader: commit for a partition this member no longer owns dropped",
				"topic", tp.Topic, "partition", tp.Partition, "offset", next, "generation", cur.gen.ID)
			continue
		case next < floor:
			g.m.Errors.WithLabelValues(tp.Topic, "commit_dropped").Inc()
			g.log.Info("kafka reader: commit below the group's committed offset dropped",
				"topic", tp.Topic, "partition", tp.Partition, "offset", next, "committed", floor, "generation", cur.gen.ID)
			continue
		case next == floor:
			continue
		}
		if out[tp.Topic] == nil {
			out[tp.Topic] = map[int]int64{}
		}
		out[tp.Topic][tp.Partition] = next
	}
	return out
}

// CommitOffset commits next as the offset to resume topic/partition from
// (the offset of the first unprocessed message).
func (g *GroupReader) CommitOffset(ctx context.Context, topic string, partition int, next int64) error {
	return g.Commit(ctx, Message{Topic: topic, Partition: partition, Offset: next - 1})
}

// Close leaves the group. Uncommitted messages will be redelivered to the
// next member.
func (g *GroupReader) Close() error {
	var err error
	g.once.Do(func() {
		close(g.closed)
		err = g.cg.Close()
		<-g.done
		for _, gl := range g.lags {
			g.m.groupLag.remove(gl)
		}
	})
	if err != nil {
		return fmt.Errorf("kafka reader %s: close: %w", g.group, err)
	}
	return nil
}
