package archiver_test

import (
	"testing"

	"github.com/segmentio/kafka-go/compress"
)

func BenchmarkZZLevel1(b *testing.B) {
	compress.ZstdCodec.Level = 1
	defer func() { compress.ZstdCodec.Level = 0 }()
	benchEndToEnd(b, false)
}
