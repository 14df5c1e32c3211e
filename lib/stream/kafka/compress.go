package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"

	kafkago "github.com/segmentio/kafka-go"
	kafkacompress "github.com/segmentio/kafka-go/compress"
	kgzip "github.com/segmentio/kafka-go/compress/gzip"
	klz4 "github.com/segmentio/kafka-go/compress/lz4"
	ksnappy "github.com/segmentio/kafka-go/compress/snappy"
	kzstd "github.com/segmentio/kafka-go/compress/zstd"
	"github.com/segmentio/kafka-go/protocol"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// ZstdLevel is the zstd level of produced batches (zstd's numbering; kafka-go maps 1 to
// klauspost's SpeedFastest). Level 1 rather than kafka-go's default 3: batch compression was the
// largest single cost of the producer → broker → archiver path, and level 1 cut the whole path's
// CPU per 107 KB trajectory by about a sixth (consumers/archiver BenchmarkEndToEnd), for batches
// 12% larger with uniformly random token ids and 2.5% larger with Zipf-distributed ones
// (docs/PERFORMANCE.md, "Streaming backbone"). Decoding costs the same at every level.
const ZstdLevel = 1

// writerCodec returns the codec a writer compresses its batches with: an instance of its own,
// so its settings (the zstd level) are the writer's and not kafka-go's process-wide codec table,
// which other code in the process may use or change. nil is no compression.
func writerCodec(name string) (kafkacompress.Codec, error) {
	switch name {
	case "", "zstd":
		return &kzstd.Codec{Level: ZstdLevel}, nil
	case "lz4":
		return &klz4.Codec{}, nil
	case "snappy":
		return &ksnappy.Codec{}, nil
	case "gzip":
		return &kgzip.Codec{}, nil
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("unknown compression %q (zstd, lz4, snappy, gzip, none)", name)
	}
}

// compressingTransport compresses the record batches of produce requests with its writer's codec.
// kafka-go compresses a batch while encoding the request, with the codec its global table holds
// for the batch's compression code, so a per-writer setting needs the batch encoded here: the
// writer sends uncompressed batches, and this transport re-encodes each as a raw record set —
// kafka-go's own v2 encoding with the records section compressed, the compression code set in
// the attributes and the length and CRC-32C recomputed — before the shared transport sends it.
// Every other request passes through.
type compressingTransport struct {
	kafkago.RoundTripper
	codec kafkacompress.Codec
}

func (t *compressingTransport) RoundTrip(ctx context.Context, addr net.Addr, req kafkago.Request) (kafkago.Response, error) {
	pr, ok := req.(*produceapi.Request)
	if !ok || t.codec == nil {
		return t.RoundTripper.RoundTrip(ctx, addr, req)
	}
	raw := &rawproduce.Request{TransactionalID: pr.TransactionalID, Acks: pr.Acks, Timeout: pr.Timeout}
	for _, topic := range pr.Topics {
		rt := rawproduce.RequestTopic{Topic: topic.Topic}
		for _, p := range topic.Partitions {
			b, err := compressBatch(p.RecordSet, t.codec)
			if err != nil {
				return nil, fmt.Errorf("kafka writer %s: compress batch: %w", topic.Topic, err)
			}
			rt.Partitions = append(rt.Partitions, rawproduce.RequestPartition{Partition: p.Partition,
				RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b)}})
		}
		raw.Topics = append(raw.Topics, rt)
	}
	return t.RoundTripper.RoundTrip(ctx, addr, raw)
}

// Offsets in a v2 record batch (after the 4-byte size prefix protocol.RecordSet.WriteTo writes).
const (
	batchLength     = 4 + 8      // int32 batch length, counting from the leader epoch
	batchCRC        = 4 + 17     // uint32 CRC-32C of everything from the attributes on
	batchAttributes = 4 + 21     // int16; the low 3 bits are the compression code
	batchRecords    = 4 + 61     // the records, compressed as one stream when compressed
	compressionMask = int16(0x7) // protocol.Attributes' compression bits
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// compressBatch encodes rs as one v2 record batch with its records compressed by codec.
func compressBatch(rs protocol.RecordSet, codec kafkacompress.Codec) ([]byte, error) {
	rs.Version = 2
	rs.Attributes &^= protocol.Attributes(compressionMask)
	var plain bytes.Buffer
	if _, err := rs.WriteTo(&plain); err != nil {
		return nil, err
	}
	b := plain.Bytes()
	if len(b) < batchRecords {
		return nil, fmt.Errorf("record batch of %d bytes is shorter than its header", len(b))
	}
	out := bytes.NewBuffer(make([]byte, 0, len(b)))
	out.Write(b[:batchRecords])
	w := codec.NewWriter(out)
	if _, err := w.Write(b[batchRecords:]); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	o := out.Bytes()
	binary.BigEndian.PutUint32(o[0:4], uint32(len(o)-4))
	binary.BigEndian.PutUint32(o[batchLength:], uint32(len(o)-batchLength-4))
	attr := int16(binary.BigEndian.Uint16(o[batchAttributes:]))&^compressionMask | int16(codec.Code())&compressionMask
	binary.BigEndian.PutUint16(o[batchAttributes:], uint16(attr))
	binary.BigEndian.PutUint32(o[batchCRC:], crc32.Checksum(o[batchAttributes:], castagnoli))
	return o, nil
}
