// Package kafka is lib/stream over Kafka through kafka-go, imported as tkafka: consumer-group and
// topic readers that hand out lib/stream Messages and commit through its Watermark, writers with a
// compression codec per writer, dead letters (the raw message plus the error, origin, consumer and
// time as headers), topic administration, SASL/TLS dialing and the client metrics. The roles'
// wiring (producers/rollout/kafka.go, consumers/archiver/kafka.go, trainer/kafkaio, cmd/*) is its
// only user, so everything else stays transport-neutral and is tested against lib/stream alone.
package kafka
