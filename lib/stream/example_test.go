package stream_test

import (
	"fmt"

	"tau2rl/lib/stream"
)

// Work finishes out of order; the commit point moves only past messages that are done together
// with every message before them. Here offset 11 finishes first: nothing can be committed yet,
// since committing past 10 would lose it on a crash. When 10 finishes, the commit point jumps
// to 12 (resume from the first message not done).
func ExampleWatermark() {
	w := stream.NewWatermark(stream.RedeliveryTrack)
	p := stream.Partition{Topic: "trajectories", Partition: 0}
	a := w.Add(p, 10, 1) // one hold each: the work the message starts
	b := w.Add(p, 11, 1)
	c := w.Add(p, 12, 1)

	for _, tk := range []*stream.Ticket{b, a, c} {
		o, ok, err := w.Done(tk)
		if err != nil {
			fmt.Println(err)
			return
		}
		if !ok {
			fmt.Println("done, nothing to commit yet")
			continue
		}
		fmt.Printf("commit %s/%d: resume from %d\n", o.Topic, o.Partition, o.Next)
		w.Committed(o)
	}
	fmt.Println("pending:", w.Pending())
	// Output:
	// done, nothing to commit yet
	// commit trajectories/0: resume from 12
	// commit trajectories/0: resume from 13
	// pending: 0
}

// An archiver holds a message once for every file its rows went to, and releases each hold when
// that file is durable: the message is done when the last file is.
func ExampleWatermark_Hold() {
	w := stream.NewWatermark(stream.RedeliveryTrack)
	p := stream.Partition{Topic: "trajectories", Partition: 3}
	tk := w.Add(p, 7, 0)   // no work yet
	w.Hold(tk)             // rows in file A
	w.Hold(tk)             // rows in file B
	_, ok, _ := w.Done(tk) // file A durable
	fmt.Println("after file A:", ok)
	o, ok, _ := w.Done(tk) // file B durable
	fmt.Println("after file B:", ok, o.Next)
	// Output:
	// after file A: false
	// after file B: true 8
}
