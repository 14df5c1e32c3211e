package kafka

import "time"

// SetTopicReaderWatchInterval shortens the partition watch for a test and
// returns a function restoring it.
func SetTopicReaderWatchInterval(d time.Duration) (restore func()) {
	old := topicReaderWatchInterval
	topicReaderWatchInterval = d
	return func() { topicReaderWatchInterval = old }
}
