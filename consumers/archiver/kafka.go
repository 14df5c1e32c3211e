package archiver

import (
	"context"
	"errors"
	"fmt"
	"time"

	tkafka "tau2rl/lib/stream/kafka"
)

// closingSource is the group reader that also closes the dead-letter writer
// when the run ends.
type closingSource struct {
	*tkafka.GroupReader
	dl *tkafka.DeadLetters
}

func (s closingSource) Close() error {
	return errors.Join(s.GroupReader.Close(), s.dl.Close())
}

// OpenKafka opens an archiver on the Kafka cluster of kc: a group reader on
// cfg.Topic (default kc.Topics.Trajectories) in group cfg.Group, dead letters
// to kc.Topics.DeadLetters, and the group's committed offsets for start-up.
// Fields of d that are set (FS, NewSink, Metrics, Log, Now) are kept (NewSink
// defaults to ParquetSink(cfg.Parquet)); km
// are the transport metrics (may be nil).
func OpenKafka(ctx context.Context, cfg Config, kc tkafka.Config, d Deps, km *tkafka.Metrics) (*Archiver, error) {
	if d.NewSink == nil {
		sink, err := ParquetSink(cfg.Parquet)
		if err != nil {
			return nil, err
		}
		d.NewSink = sink
	}
	topic := cfg.Topic
	if topic == "" {
		topic = kc.Topics.Trajectories
	}
	if d.MaxMessageBytes == 0 {
		d.MaxMessageBytes = kc.MaxMessageBytes
	}
	admin, err := tkafka.NewAdmin(kc)
	if err != nil {
		return nil, err
	}
	if err := admin.EnsureTopics(ctx, topic, kc.Topics.DeadLetters); err != nil {
		return nil, fmt.Errorf("archiver: %w", err)
	}
	dl, err := tkafka.NewDeadLetters(kc, "archiver", km)
	if err != nil {
		return nil, err
	}
	// One archiver per dataset directory (the lock, taken before joining the group so that a
	// refused second archiver never takes partitions), and one dataset per group: the group's
	// partitions go only to archivers of this dataset directory (see exclusive.go).
	id, err := datasetID(cfg.DatasetDir)
	if err != nil {
		dl.Close()
		return nil, err
	}
	unlock, err := lockDir(cfg.DatasetDir)
	if err != nil {
		dl.Close()
		return nil, err
	}
	d.unlock = unlock
	fail := func(err error) (*Archiver, error) {
		unlock()
		return nil, err
	}
	members, err := settledMembers(ctx, admin.GroupMembers, cfg.Group, 2*kc.Reader.SessionTimeout, 200*time.Millisecond)
	if err != nil {
		dl.Close()
		return fail(fmt.Errorf("archiver: %w", err))
	}
	members = ownGhosts(members, kc.ClientID, d.Log)
	if err := refuseOtherDatasets(members, cfg.Group, cfg.DatasetDir, id); err != nil {
		dl.Close()
		return fail(err)
	}
	self := tkafka.Owner{ID: id, Start: time.Now()}
	r, err := tkafka.NewExclusiveGroupReader(kc, cfg.Group, []string{topic}, km, self)
	if err != nil {
		dl.Close()
		return fail(err)
	}
	if d.CheckGroup == nil {
		d.CheckGroup = checkGroup(admin, cfg.Group, cfg.DatasetDir, self)
	}
	d.Source = closingSource{GroupReader: r, dl: dl}
	d.DeadLetters = dl
	d.Topic = topic
	d.Committed = func(ctx context.Context) (map[int]int64, error) {
		return admin.CommittedOffsets(ctx, cfg.Group, topic)
	}
	a, err := Open(ctx, cfg, d) // releases the lock when it fails
	if err != nil {
		d.Source.Close()
		return nil, err
	}
	return a, nil
}
