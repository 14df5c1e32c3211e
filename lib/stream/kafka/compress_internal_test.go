package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"testing"

	kafkacompress "github.com/segmentio/kafka-go/compress"
	kzstd "github.com/segmentio/kafka-go/compress/zstd"
	"github.com/segmentio/kafka-go/protocol"
)

// compressBatch's output is a valid v2 batch: length and CRC-32C right, the writer's compression
// code in the attributes, and kafka-go's decoder reads back every record.
func TestCompressBatchRoundTrip(t *testing.T) {
	for _, name := range []string{"zstd", "lz4", "snappy", "gzip"} {
		t.Run(name, func(t *testing.T) {
			codec, err := writerCodec(name)
			if err != nil {
				t.Fatal(err)
			}
			var recs []protocol.Record
			for i := range 50 {
				recs = append(recs, protocol.Record{
					Key:     protocol.NewBytes([]byte(fmt.Sprintf("task-%d", i%3))),
					Value:   protocol.NewBytes(bytes.Repeat([]byte{byte(i)}, 1000+i)),
					Headers: []protocol.Header{{Key: "content-type", Value: []byte("x")}},
				})
			}
			b, err := compressBatch(protocol.RecordSet{Records: protocol.NewRecordReader(recs...)}, codec)
			if err != nil {
				t.Fatal(err)
			}
			if got := binary.BigEndian.Uint32(b[0:4]); int(got) != len(b)-4 {
				t.Fatalf("size prefix %d, batch %d", got, len(b)-4)
			}
			if got := binary.BigEndian.Uint32(b[batchLength:]); int(got) != len(b)-batchLength-4 {
				t.Fatalf("batch length %d, want %d", got, len(b)-batchLength-4)
			}
			if got, want := binary.BigEndian.Uint32(b[batchCRC:]), crc32.Checksum(b[batchAttributes:], castagnoli); got != want {
				t.Fatalf("crc %08x, want %08x", got, want)
			}
			if code := int8(binary.BigEndian.Uint16(b[batchAttributes:]) & 7); code != codec.Code() {
				t.Fatalf("compression code %d, want %d", code, codec.Code())
			}
			if len(b) > 50*1000/2 {
				t.Fatalf("batch of %d bytes is not compressed", len(b))
			}
			var rs protocol.RecordSet
			if _, err := rs.ReadFrom(bytes.NewReader(b)); err != nil {
				t.Fatal(err)
			}
			for i := 0; ; i++ {
				r, err := rs.Records.ReadRecord()
				if err == io.EOF {
					if i != 50 {
						t.Fatalf("read %d records, want 50", i)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				v, _ := protocol.ReadAll(r.Value)
				if len(v) != 1000+i || v[0] != byte(i) || r.Offset != int64(i) {
					t.Fatalf("record %d: offset %d, %d bytes", i, r.Offset, len(v))
				}
			}
		})
	}
}

// Writers leave kafka-go's process-wide codec table alone: the zstd level is the writer's.
func TestWriterCompressionIsPerWriter(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	before := kafkacompress.ZstdCodec.Level
	w, err := NewWriter(cfg, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if kafkacompress.ZstdCodec.Level != before {
		t.Fatalf("global zstd level changed to %d", kafkacompress.ZstdCodec.Level)
	}
	tr, ok := w.w.Transport.(*compressingTransport)
	if !ok {
		t.Fatalf("transport %T", w.w.Transport)
	}
	if z, ok := tr.codec.(*kzstd.Codec); !ok || z.Level != ZstdLevel || ZstdLevel != 1 {
		t.Fatalf("codec %#v, want zstd level 1", tr.codec)
	}
	if w.w.Compression != 0 {
		t.Fatalf("kafka-go compresses too (%v)", w.w.Compression)
	}
}
