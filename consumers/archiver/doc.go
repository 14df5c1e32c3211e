// Package archiver consumes scored trajectories from Kafka (consumer group
// "archiver") and writes them to a Parquet dataset with Hive partitions
// domain=<d>/date=<YYYY-MM-DD>/ (schemas.PartitionDir, dated by the
// trajectory's ended_at, else started_at, else the message timestamp), one
// row per trajectory, zstd-compressed, readable by DuckDB.
//
// # Files
//
// Each partition directory has at most one open file. A file is written as
// ".part-<time>-<run>-<seq>.parquet.tmp" (dot-prefixed and .tmp, so globs of
// *.parquet, the dataset reader and releases never see it) and rolled when
// its estimated size reaches roll.max_bytes or it has been open roll.max_age.
// Rolling writes the footer — with the source Kafka offsets
// (MetaKafkaOffsets), the row count and the schema version in the key-value
// metadata — then fsyncs the file, renames it to "part-…​.parquet" and fsyncs
// the directory. A visible data file is therefore always complete.
//
// # Delivery guarantees
//
// Offsets are committed only for messages whose rows are in renamed and
// fsynced files (or that were dead-lettered with an acknowledged write, or
// were duplicates). Kafka commits one offset per partition, so a message
// waiting in an open file holds back its partition's commit; after a crash
// everything after the last commit is redelivered. Hence:
//
//   - No loss: a kill -9 at any moment loses nothing; a message is committed
//     only after its rows are durable.
//   - No visible partial file: a crash leaves at most temporary files, which
//     the next start removes.
//   - No duplicates from redelivery: at start-up the archiver reads the
//     footers of all data files and, for every file holding an offset at or
//     past the group's committed offset of its partition (written but not
//     committed before the crash), loads the file's trajectory ids; the
//     redelivered copies are then dropped. During a run every archived id
//     is remembered, so redelivery after a rebalance is dropped too.
//   - Producer duplicates (one trajectory id published twice, e.g. a writer
//     retry or a replay re-run) are dropped when the second copy arrives
//     within the last dedup_window archived ids (default one million), also
//     across restarts: start-up reloads the ids of the newest data files
//     into the window (the dataset is the index, so it is exactly as
//     crash-safe as the files). Copies further apart are not detected by the
//     archiver; readers (schemas/dataset scans, releases) de-duplicate by
//     id over everything they read.
//   - A message that cannot be archived — undecodable, an unknown schema
//     major version, an invalid trajectory, an unsafe domain or split such
//     as "../../etc", larger than max_message_bytes — goes to the
//     dead-letter topic with the error and its origin; the archiver keeps
//     going. If the dead letter cannot be written the archiver stops rather
//     than skip the message.
//   - A failed write (a full disk, an I/O error) stops the run with the
//     error: open temporary files are removed, only durable progress is
//     committed, and the next run gets the rest again.
//
// The guarantees assume one archiver per dataset directory, which Open
// enforces with a lock file (.archiver.lock), and one dataset per consumer
// group: two archivers of different directories in one group would each get
// part of the topic, and a rebalance would put rows in both. OpenKafka binds
// the group to the directory's id (.archiver.dataset-id) through an exclusive
// assignment (lib/stream/kafka.NewExclusiveGroupReader): partitions go only to
// the archivers of the directory that started first, and another one exits
// with an error naming the archiver that has the group. A complete second
// copy is an archiver with its own group. docs/OPERATIONS.md ("Archiver
// topologies") lists the supported layouts.
package archiver
