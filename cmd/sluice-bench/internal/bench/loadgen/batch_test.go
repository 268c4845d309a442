package loadgen

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// countingConn records every write it is given, and the last write deadline.
type countingConn struct {
	net.Conn
	writes   [][]byte
	deadline time.Time
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.deadline = t
	return nil
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// Held writes leave in one write on flush, in order; unheld ones go straight through.
func TestBatchConnGathersHeldWrites(t *testing.T) {
	t.Parallel()
	under := &countingConn{}
	b := &batchConn{Conn: under}
	_, _ = b.Write([]byte("a"))
	b.hold()
	_, _ = b.Write([]byte("b"))
	_, _ = b.Write([]byte("c"))
	if len(under.writes) != 1 {
		t.Fatalf("held writes reached the connection: %q", under.writes)
	}
	by := time.Now().Add(time.Minute)
	if err := b.flush(by); err != nil {
		t.Fatal(err)
	}
	if !under.deadline.Equal(by) {
		t.Errorf("flushed with deadline %v, want %v", under.deadline, by)
	}
	_, _ = b.Write([]byte("d"))
	if err := b.flush(time.Time{}); err != nil { // nothing held: no empty write
		t.Fatal(err)
	}
	want := []string{"a", "bc", "d"}
	if len(under.writes) != len(want) {
		t.Fatalf("writes %q, want %q", under.writes, want)
	}
	for i, w := range want {
		if string(under.writes[i]) != w {
			t.Errorf("write %d: %q, want %q", i, under.writes[i], w)
		}
	}
}

// A held connection writes out at batchLimit rather than growing without bound.
func TestBatchConnWritesOutAtLimit(t *testing.T) {
	t.Parallel()
	under := &countingConn{}
	b := &batchConn{Conn: under}
	b.hold()
	frame := make([]byte, batchLimit/4)
	for range 5 {
		_, _ = b.Write(frame)
	}
	if len(under.writes) != 1 || len(under.writes[0]) != batchLimit {
		t.Fatalf("%d writes before flush, want one of %d bytes", len(under.writes), batchLimit)
	}
	if err := b.flush(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if len(under.writes) != 2 || len(under.writes[1]) != len(frame) {
		t.Fatalf("flush wrote %d writes", len(under.writes))
	}
}
