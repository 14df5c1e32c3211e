package stream

import (
	"errors"
	"reflect"
	"sync"
	"testing"
)

var p0, p1 = Partition{"t", 0}, Partition{"t", 1}

func next(t *testing.T, o Offset, ok bool, err error) int64 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return -1
	}
	return o.Next
}

// Done commits contiguously: a message finished early waits for the ones before it.
func TestWatermarkDoneCommitsContiguously(t *testing.T) {
	w := NewWatermark(RedeliveryRestart)
	a, b, c := w.Add(p0, 10, 1), w.Add(p0, 11, 1), w.Add(p0, 12, 1)
	other := w.Add(p1, 5, 1)
	for _, tc := range []struct {
		tk   *Ticket
		want int64
	}{{b, -1}, {a, 12}, {other, 6}, {c, 13}} {
		o, ok, err := w.Done(tc.tk)
		if got := next(t, o, ok, err); got != tc.want {
			t.Fatalf("done %d: next %d, want %d", tc.tk.offset, got, tc.want)
		}
	}
	if w.Pending() != 0 {
		t.Fatalf("pending %d", w.Pending())
	}
}

// RedeliveryRestart: a rebalance redelivers from 11; the old generation commits nothing.
func TestWatermarkRestart(t *testing.T) {
	w := NewWatermark(RedeliveryRestart)
	for off := int64(10); off <= 12; off++ {
		if _, _, err := w.Done(w.Add(p0, off, 1)); err != nil {
			t.Fatal(err)
		}
	}
	d := w.Add(p0, 13, 1)
	e := w.Add(p0, 11, 1)
	if o, ok, err := w.Done(d); next(t, o, ok, err) != -1 {
		t.Fatal("stale generation committed")
	}
	if err := w.Release(d); err != nil {
		t.Fatalf("release of a stale ticket: %v", err)
	}
	if o, ok, err := w.Done(e); next(t, o, ok, err) != 12 {
		t.Fatalf("new generation: %+v %v", o, ok)
	}
}

// RedeliveryTrack with holds (the archiver): a message is done once every file holding its rows
// is released; a message with no holds (duplicate, dead letter) is done at once; Advance reports
// only partitions that moved since the last Committed.
func TestWatermarkHoldsAndAdvance(t *testing.T) {
	w := NewWatermark(RedeliveryTrack)
	m10 := w.Add(p0, 10, 0)
	w.Hold(m10)
	w.Hold(m10) // rows in two files
	m11 := w.Add(p0, 11, 0)
	m12 := w.Add(p0, 12, 0)
	w.Hold(m12)
	if got := w.Advance(); len(got) != 0 {
		t.Fatalf("advance before anything done: %v", got)
	}
	if got := w.Offsets(); len(got) != 0 {
		t.Fatalf("offsets before anything done: %v", got)
	}
	w.Release(m10)
	if got := w.Advance(); len(got) != 0 {
		t.Fatalf("advance with one of two files durable: %v", got)
	}
	w.Release(m10)
	want := []Offset{{"t", 0, 12}}
	if got := w.Advance(); !reflect.DeepEqual(got, want) {
		t.Fatalf("advance = %v, want %v", got, want)
	}
	if w.Settled(m12) || !w.Settled(m11) {
		t.Fatal("settled wrong")
	}
	if got := w.Advance(); !reflect.DeepEqual(got, want) {
		t.Fatalf("uncommitted point not reported again: %v", got)
	}
	w.Committed(want[0])
	if got := w.Advance(); len(got) != 0 {
		t.Fatalf("committed point reported again: %v", got)
	}
	w.Release(m12)
	if got := w.Advance(); !reflect.DeepEqual(got, []Offset{{"t", 0, 13}}) {
		t.Fatalf("advance = %v", got)
	}
	if err := w.Release(m12); !errors.Is(err, ErrOverRelease) {
		t.Fatalf("over-release: %v", err)
	}
	// A redelivered copy queues behind and never moves the point back.
	dup := w.Add(p0, 11, 0)
	if got := w.Advance(); !reflect.DeepEqual(got, []Offset{{"t", 0, 13}}) || !w.Settled(dup) {
		t.Fatalf("after redelivery: %v", got)
	}
}

// RedeliveryTrack: redelivered copies queued behind a held message (done at once) neither move
// the point back nor past the held one (the archiver's case).
func TestWatermarkTrackRedeliveryBehindHeld(t *testing.T) {
	w := NewWatermark(RedeliveryTrack)
	m10, m11, m12 := w.Add(p0, 10, 1), w.Add(p0, 11, 0), w.Add(p0, 12, 1) // 11 a duplicate
	if got := w.Advance(); len(got) != 0 {
		t.Fatalf("committed past an open file: %v", got)
	}
	w.Release(m10)
	if got := w.Advance(); !reflect.DeepEqual(got, []Offset{{"t", 0, 12}}) {
		t.Fatalf("advance = %v, want next 12", got)
	}
	w.Committed(Offset{"t", 0, 12})
	w.Add(p0, 10, 0)
	w.Add(p0, 11, 0)
	if got := w.Advance(); len(got) != 0 || w.Pending() != 3 {
		t.Fatalf("advance %v pending %d", got, w.Pending())
	}
	w.Release(m12)
	if got := w.Advance(); !reflect.DeepEqual(got, []Offset{{"t", 0, 13}}) || w.Pending() != 0 || !w.Settled(m11) {
		t.Fatalf("advance %v pending %d, want 13 and 0", got, w.Pending())
	}
}

// RedeliveryIgnore (the trainer): redeliveries are not tracked; Offsets reports every partition,
// from the first tracked offset even before anything is done, and skips gaps.
func TestWatermarkIgnoreAndOffsets(t *testing.T) {
	w := NewWatermark(RedeliveryIgnore)
	a := w.Add(p0, 4, 2)
	b := w.Add(p0, 7, 1) // a gap: 5 and 6 were never delivered (compaction, markers)
	w.Add(p1, 0, 0)
	if w.Add(p0, 4, 1) != nil {
		t.Fatal("redelivery tracked")
	}
	w.Advance()
	if got, want := w.Offsets(), []Offset{{"t", 0, 4}, {"t", 1, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("offsets = %v, want %v", got, want)
	}
	w.Release(a)
	w.Release(a)
	w.Advance()
	if got := w.Offsets()[0].Next; got != 7 {
		t.Fatalf("after 4 done: next %d, want 7 (the first message not done)", got)
	}
	w.Release(b)
	w.Advance()
	if got := w.Offsets()[0].Next; got != 8 {
		t.Fatalf("after all done: next %d, want 8", got)
	}
	if w.Release(nil) != nil || w.Settled(nil) {
		t.Fatal("nil ticket")
	}
}

func TestWatermarkConcurrentDone(t *testing.T) {
	w := NewWatermark(RedeliveryRestart)
	var tks []*Ticket
	for off := range int64(200) {
		tks = append(tks, w.Add(p0, off, 1))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	high := int64(-1)
	for _, tk := range tks {
		wg.Go(func() {
			o, ok, err := w.Done(tk)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				high = max(high, o.Next)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if high != 200 || w.Pending() != 0 {
		t.Fatalf("high %d pending %d", high, w.Pending())
	}
}

func TestCommitPoint(t *testing.T) {
	if m := CommitPoint("t", 2, 10); m.Topic != "t" || m.Partition != 2 || m.Offset != 9 {
		t.Fatalf("%+v", m)
	}
}
