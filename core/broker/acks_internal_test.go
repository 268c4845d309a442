package broker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// listConsumer is a pulsar.Consumer whose AckIDList records each list and waits for the test
// to let it return.
type listConsumer struct {
	pulsar.Consumer
	lists   chan []int64 // the entry ids of each list, as it is sent
	release chan struct{}
}

func (c *listConsumer) AckIDList(ids []pulsar.MessageID) error {
	entries := make([]int64, len(ids))
	for i, id := range ids {
		entries[i] = id.EntryID()
	}
	c.lists <- entries
	<-c.release
	return nil
}

func entry(n int64) pulsar.MessageID { return pulsar.NewMessageID(1, n, -1, 0) }

// TestAckLists: the first ack leaves at once and alone; the acks that arrive while a list is
// with the broker leave together in the next; a full queue holds add back until a list is
// taken; wait returns once the broker has answered; nothing runs, and no burst's list is
// kept, once the acks are sent.
func TestAckLists(t *testing.T) {
	t.Parallel()
	c := &listConsumer{lists: make(chan []int64, 16), release: make(chan struct{})}
	a := newAcks(c, slog.New(slog.DiscardHandler))
	a.add(entry(0), 0)
	if got := <-c.lists; len(got) != 1 || got[0] != 0 {
		t.Fatalf("first list %v, want [0]", got)
	}
	for i := range int64(maxAckList) {
		a.add(entry(1+i), 0)
	}
	added := make(chan struct{})
	go func() { a.add(entry(maxAckList+1), 0); close(added) }()
	select {
	case <-added:
		t.Fatal("add returned with the queue full")
	case <-time.After(50 * time.Millisecond):
	}
	c.release <- struct{}{} // the first list is answered
	second := <-c.lists
	if len(second) != maxAckList || second[0] != 1 || second[maxAckList-1] != maxAckList {
		t.Fatalf("second list has %d acks (%v…), want the %d queued, in order", len(second), second[:min(3, len(second))], maxAckList)
	}
	<-added // the list was taken: there is room
	waited := make(chan struct{})
	go func() { a.wait(5 * time.Second); close(waited) }()
	c.release <- struct{}{}
	if third := <-c.lists; len(third) != 1 || third[0] != maxAckList+1 {
		t.Fatalf("third list %v, want [%d]", third, maxAckList+1)
	}
	select {
	case <-waited:
		t.Fatal("wait returned with a list unanswered")
	case <-time.After(50 * time.Millisecond):
	}
	c.release <- struct{}{}
	<-waited
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sending != nil || len(a.queued) != 0 || cap(a.queued)+cap(a.spare) != 0 {
		t.Errorf("after the last list: sending %v, %d queued, lists of %d kept; want no sender, none, and the burst's lists dropped",
			a.sending != nil, len(a.queued), cap(a.queued)+cap(a.spare))
	}
}

// TestAckListsBoundDecodedBatches: the decoded acks of one list claim at most maxAckSetBits
// batch indexes between them, each of which the library writes as a bit of an ack set: an ack
// that would pass the bound waits for the next list, and one alone in a list always goes.
func TestAckListsBoundDecodedBatches(t *testing.T) {
	t.Parallel()
	c := &listConsumer{lists: make(chan []int64, 16), release: make(chan struct{})}
	a := newAcks(c, slog.New(slog.DiscardHandler))
	half := maxAckSetBits / 2
	a.add(entry(0), 2*maxAckSetBits) // alone, over the bound
	if got := <-c.lists; len(got) != 1 || got[0] != 0 {
		t.Fatalf("first list %v, want [0]", got)
	}
	a.add(entry(1), half)
	a.add(entry(2), half)
	added := make(chan struct{})
	go func() { a.add(entry(3), half); close(added) }()
	select {
	case <-added:
		t.Fatal("add returned with the queued acks claiming the bound")
	case <-time.After(50 * time.Millisecond):
	}
	c.release <- struct{}{}
	if second := <-c.lists; len(second) != 2 || second[0] != 1 || second[1] != 2 {
		t.Fatalf("second list %v, want [1 2]", second)
	}
	<-added
	c.release <- struct{}{}
	if third := <-c.lists; len(third) != 1 || third[0] != 3 {
		t.Fatalf("third list %v, want [3]", third)
	}
	c.release <- struct{}{}
	a.wait(5 * time.Second)
}

// TestAckWaitBounded: wait gives up after its bound when the broker does not answer.
func TestAckWaitBounded(t *testing.T) {
	t.Parallel()
	c := &listConsumer{lists: make(chan []int64, 1), release: make(chan struct{})}
	a := newAcks(c, slog.New(slog.DiscardHandler))
	a.add(entry(7), 0)
	<-c.lists
	start := time.Now()
	a.wait(100 * time.Millisecond)
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("wait returned after %s, want about 100ms", d)
	}
	c.release <- struct{}{}
}
