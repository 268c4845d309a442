package wsconn

import (
	"compress/flate"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
)

// Compressed messages are written by this package too, as permessage-deflate without context
// takeover (RFC 7692 section 7.2.3 and 7.1.2): each message is compressed on its own, so a
// connection holds no compressor between writes; the compressors are shared.

// CompressMin is the smallest data message sent compressed: below it (an ack is about 100
// bytes) deflate saves little and costs a compressor reset per message.
const CompressMin = 256

// compressLevel is gorilla's default, the fastest deflate level: on a proxy's hot path the CPU
// is worth more than the last bytes.
const compressLevel = flate.BestSpeed

// Compressors are few and shared: each holds about 1.2 MB of deflate state, so a pool that
// grew with concurrent writers could hold gigabytes. At most maxCompressors exist; a write
// that finds none free sends its messages uncompressed, which permessage-deflate allows.
var (
	maxCompressors  = max(4, 2*runtime.GOMAXPROCS(0))
	freeCompressors = make(chan *compressor, maxCompressors)
	compressorCount atomic.Int32
)

// getCompressor returns a free compressor, or nil when all are in use.
func getCompressor() *compressor {
	select {
	case z := <-freeCompressors:
		return z
	default:
	}
	if compressorCount.Add(1) > int32(maxCompressors) { //nolint:gosec // G115: max(4, 2*GOMAXPROCS)
		compressorCount.Add(-1)
		return nil
	}
	w, _ := flate.NewWriter(io.Discard, compressLevel) // a valid level: never an error
	return &compressor{w: w}
}

// compressor is a flate writer with the buffer it writes into.
type compressor struct {
	w   *flate.Writer
	out []byte
}

func (z *compressor) Write(p []byte) (int, error) {
	z.out = append(z.out, p...)
	return len(p), nil
}

// maxKeptCompressed is the largest output buffer a pooled compressor keeps.
const maxKeptCompressed = 64 << 10

// deflate returns m compressed as one permessage-deflate message, valid until z's next use, or
// false when compressing does not make it smaller or z is nil (none was free).
func (z *compressor) deflate(m []byte) ([]byte, bool) {
	if z == nil {
		return nil, false
	}
	z.out = z.out[:0]
	z.w.Reset(z)
	_, _ = z.w.Write(m) // writes to z never fail
	_ = z.w.Flush()
	// A sync flush ends with an empty stored block, 00 00 ff ff, which the message leaves out.
	out := z.out[:len(z.out)-4]
	if len(out) >= len(m) {
		return nil, false
	}
	return out, true
}

func (z *compressor) release() {
	if cap(z.out) > maxKeptCompressed {
		z.out = nil
	}
	freeCompressors <- z // never blocks: there are at most cap(freeCompressors)
}

// offersDeflate reports whether a handshake offers permessage-deflate, as gorilla decides when
// it accepts the extension (it accepts any offer of it, whatever its parameters).
func offersDeflate(h http.Header) bool {
	for _, v := range h.Values("Sec-Websocket-Extensions") {
		for _, ext := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(ext, ";")
			if strings.TrimSpace(name) == "permessage-deflate" {
				return true
			}
		}
	}
	return false
}
