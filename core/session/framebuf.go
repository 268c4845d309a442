package session

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/wsconn"
)

// keptReadBuffer is the largest frame buffer a session keeps between frames, and the most it
// holds uncharged: the session's cost (ProducerSessionCost, ConsumerSessionCost) covers it.
const keptReadBuffer = 4 << 10

// frameBuffer is the buffer a session's reader reads frames into. Growing it past
// keptReadBuffer is charged to the session pool (memory.session_limit) before the bytes are
// read into it, and stays charged while the frame is handled, so that clients cannot make the
// edge hold large frames it has not charged: with permessage-deflate, a compressed frame is
// charged by its inflated size as it is inflated. A frame that does not fit is refused and
// answered as such.
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

// grow returns a buffer of at least size bytes holding b's. A large one is charged before it
// is taken, and b's charge released only once its bytes have been copied, so that the
// buffers a frame holds are always charged, the old one included while it is copied.
func (f *frameBuffer) grow(b []byte, size int) ([]byte, error) {
	if size <= keptReadBuffer {
		return append(make([]byte, 0, size), b...), nil
	}
	size = frameBufferSize(size)
	var c *admission.Charge
	if f.mem != nil {
		var err error
		if c, err = f.mem.TryHold(int64(size)); err != nil {
			return nil, fmt.Errorf("no memory for a frame buffer of %d bytes (memory.session_limit): %w", size, err)
		}
	}
	nb := append(getFrameBuffer(size), b...)
	putFrameBuffer(b)
	f.charge.Release()
	f.charge = c
	return nb, nil
}

// done is called once a frame has been handled: a large buffer goes back to the shared
// buffers, and its charge is released.
func (f *frameBuffer) done() {
	if cap(f.buf) > keptReadBuffer {
		putFrameBuffer(f.buf)
		f.buf = nil
		f.release()
	}
}

// release frees the buffer's charge; the reader calls it when it stops.
func (f *frameBuffer) release() {
	f.charge.Release()
	f.charge = nil
}

// Frame buffers larger than keptReadBuffer are shared by every session's reader, in classes of
// powers of two, rather than dropped when their frame has been handled. A dropped buffer is
// garbage the collector has to catch up with, and frames that inflate a thousand times
// (permessage-deflate of repetitive text: 7 KB on the wire, 7 MB inflated) make it faster
// than it can: each such frame allocated about twice its inflated size, and 400 of them took
// `sluice serve` to a peak resident memory of 526 to 538 MiB, past its Go memory limit of
// 512 MiB, while its live heap stayed under 180 MiB (280 MiB with the buffers shared). A
// buffer in use is charged to the session pool; an idle one is not, and the collector frees
// those that stay idle for two cycles (sync.Pool): a class holds idle at most as many buffers
// as it had in use, and charged, at once shortly before. (An explicit free list capped at
// 32 MiB was tried: bursts overflowed it, and a flood allocated three times as much.)
var frameBuffers [bits.UintSize]sync.Pool // index i: buffers of 1<<i bytes, as *[]byte

// frameBufferSize is the class size of a buffer of at least size bytes.
func frameBufferSize(size int) int { return 1 << bits.Len(uint(size-1)) }

// getFrameBuffer returns an empty buffer of size bytes, a class size.
func getFrameBuffer(size int) []byte {
	if p, ok := frameBuffers[bits.Len(uint(size-1))].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, size)
}

// putFrameBuffer hands b back to the shared buffers when it is one of them.
func putFrameBuffer(b []byte) {
	n := cap(b)
	if n <= keptReadBuffer || n&(n-1) != 0 {
		return
	}
	b = b[:0]
	frameBuffers[bits.Len(uint(n-1))].Put(&b)
}
