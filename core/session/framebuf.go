package session

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/wsconn"
)

// smallFrameBuffer is the buffer a frame is read into first, and the largest a session holds
// uncharged: the session's cost (ProducerSessionCost, ConsumerSessionCost) covers one.
const smallFrameBuffer = 4 << 10

// frameBuffer is the buffer a session's reader reads frames into, taken from the shared
// buffers for each frame and given back once the frame has been handled, so that a session
// waiting for its next frame holds none: at 1,000 busy connections the buffers each kept
// between frames were 2 MiB of the live heap. Growing it past smallFrameBuffer is charged to
// the session pool (memory.session_limit) before the bytes are read into it, and stays
// charged while the frame is handled, so that clients cannot make the edge hold large frames
// it has not charged: with permessage-deflate, a compressed frame is charged by its inflated
// size as it is inflated. A frame that does not fit is refused and answered as such.
type frameBuffer struct {
	mem    *admission.Gate // nil: not charged
	buf    []byte
	lent   *[]byte // the shared buffer buf is; nil: none
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
	size = frameBufferSize(max(size, smallFrameBuffer))
	var c *admission.Charge
	if f.mem != nil && size > smallFrameBuffer {
		var err error
		if c, err = f.mem.TryHold(int64(size)); err != nil {
			return nil, fmt.Errorf("no memory for a frame buffer of %d bytes (memory.session_limit): %w", size, err)
		}
	}
	p := getFrameBuffer(size)
	*p = append(*p, b...)
	putFrameBuffer(f.lent)
	f.lent = p
	f.charge.Release()
	f.charge = c
	return *p, nil
}

// done is called once a frame has been handled, and when the reader stops: the buffer goes
// back to the shared buffers, and its charge is released.
func (f *frameBuffer) done() {
	putFrameBuffer(f.lent)
	f.buf, f.lent = nil, nil
	f.charge.Release()
	f.charge = nil
}

// Frame buffers are shared by every session's reader, in classes of powers of two from
// smallFrameBuffer up, rather than dropped when their frame has been handled. A dropped buffer
// is garbage the collector has to catch up with, and frames that inflate a thousand times
// (permessage-deflate of repetitive text: 7 KB on the wire, 7 MB inflated) make it faster
// than it can: each such frame allocated about twice its inflated size, and 400 of them took
// `sluice serve` to a peak resident memory of 526 to 538 MiB, past its Go memory limit of
// 512 MiB, while its live heap stayed under 180 MiB (280 MiB with the buffers shared). A
// buffer in use is charged to the session pool (past smallFrameBuffer); an idle one is not,
// and the collector frees those that stay idle for two cycles (sync.Pool): a class holds idle
// at most as many buffers as it had in use at once shortly before. (An explicit free list
// capped at 32 MiB was tried: bursts overflowed it, and a flood allocated three times as
// much.)
var frameBuffers [bits.UintSize]sync.Pool // index i: buffers of 1<<i bytes, as *[]byte

// frameBufferSize is the class size of a buffer of at least size bytes.
func frameBufferSize(size int) int { return 1 << bits.Len(uint(size-1)) }

// getFrameBuffer returns an empty buffer of size bytes, a class size.
func getFrameBuffer(size int) *[]byte {
	if p, ok := frameBuffers[bits.Len(uint(size-1))].Get().(*[]byte); ok {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, size)
	return &b
}

// putFrameBuffer hands p, from getFrameBuffer, back to the shared buffers; nil is none.
func putFrameBuffer(p *[]byte) {
	if p != nil {
		frameBuffers[bits.Len(uint(cap(*p)-1))].Put(p)
	}
}
