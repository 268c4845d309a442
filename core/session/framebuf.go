package session

import (
	"fmt"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/wsconn"
)

// keptReadBuffer is the largest frame buffer a session keeps between frames, and the most it
// holds uncharged: the session's cost (ProducerSessionCost, ConsumerSessionCost) covers it.
const keptReadBuffer = 4 << 10

// frameBuffer is the buffer a session's reader reads frames into. Growing it past
// keptReadBuffer is charged to the session pool (memory.session_limit) while the frame is
// handled, so that clients cannot make the edge hold large frames it has not charged: a
// frame that does not fit is discarded and answered as refused.
type frameBuffer struct {
	mem    *admission.Gate // nil: not charged
	buf    []byte
	charge *admission.Charge
}

// read reads the next frame into the buffer.
func (f *frameBuffer) read(conn *wsconn.Conn) (wsconn.MessageType, []byte, error) {
	typ, data, err := conn.ReadInto(f.buf, f.grow)
	f.buf = data
	return typ, data, err
}

// grow charges a buffer of size bytes in place of the current charge.
func (f *frameBuffer) grow(size int) error {
	if f.mem == nil || size <= keptReadBuffer {
		return nil
	}
	c, err := f.mem.TryHold(int64(size))
	if err != nil {
		return fmt.Errorf("no memory for a frame buffer of %d bytes (memory.session_limit): %w", size, err)
	}
	f.charge.Release()
	f.charge = c
	return nil
}

// done is called once a frame has been handled: a large buffer is dropped, with its charge.
func (f *frameBuffer) done() {
	if cap(f.buf) > keptReadBuffer {
		f.buf = nil
		f.release()
	}
}

// release frees the buffer's charge; the reader calls it when it stops.
func (f *frameBuffer) release() {
	f.charge.Release()
	f.charge = nil
}
