package schemas

import (
	"encoding/json"
	"fmt"
)

// Parquet key-value metadata the archiver writes in every file footer, besides
// MetadataKeyVersion. It is part of the data contract: releases (consumers/release) copy the
// offsets into their manifest, and the archiver reads them back at start-up to find files whose
// offsets were never committed (docs/SCHEMA.md, "Parquet archive").
const (
	// MetaKafkaOffsets holds the source offsets of the rows, a JSON array
	// of OffsetRange. Releases copy it into their manifest, and start-up
	// uses it to find files whose offsets were not committed.
	MetaKafkaOffsets = "tau2rl.kafka_offsets"
	// MetaRows is the row count (decimal).
	MetaRows = "tau2rl.rows"
	// MetaWriter names the writer and its schema version.
	MetaWriter = "tau2rl.writer"
	// MetaCreated is when the file was finalized (RFC 3339).
	MetaCreated = "tau2rl.created"
)

// OffsetRange says which messages of one Kafka partition have rows in an
// archive file: the smallest and largest offset and how many messages. The offsets
// need not be contiguous (other messages of the range may be in files of
// other partitions, duplicates or dead letters).
type OffsetRange struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	First     int64  `json:"first"`
	Last      int64  `json:"last"`
	Messages  int    `json:"messages"`
}

// ParseOffsets parses the MetaKafkaOffsets value of a file footer.
func ParseOffsets(s string) ([]OffsetRange, error) {
	var out []OffsetRange
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("schemas: footer %s: %w", MetaKafkaOffsets, err)
	}
	for _, r := range out {
		if r.Topic == "" || r.Partition < 0 || r.First < 0 || r.Last < r.First || r.Messages < 1 {
			return nil, fmt.Errorf("schemas: footer %s: bad range %+v", MetaKafkaOffsets, r)
		}
	}
	return out, nil
}
