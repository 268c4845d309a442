package session_test

import (
	"bytes"
	"compress/flate"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core/session"
)

// byteReaderless hides a reader's ReadByte, as gorilla's frame reader has none: flate then
// wraps it in a bufio.Reader of its own.
type byteReaderless struct{ io.Reader }

// InflateCost covers the decompressor a session holds while it reads a compressed message,
// built as gorilla builds it (decompressNoContextTakeover: a pooled flate reader reset onto the
// frame reader, which flate wraps in a 4 KiB bufio.Reader, and the RFC 7692 tail) and in use
// (a dynamic-Huffman block read). Measured: about 44 KiB; 48 KiB charged.
func TestInflateCostCoversDecompressor(t *testing.T) {
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed) // a valid level: never an error
	_, _ = w.Write([]byte(strings.Repeat(`{"sensor":"temp-17","value":21.5},`, 2000)))
	_ = w.Flush()
	message := z.Bytes()
	const n = 500
	held := make([]io.ReadCloser, n)
	buf := make([]byte, 512)
	before := heapInUse()
	for i := range held {
		fr := flate.NewReader(nil)
		_ = fr.(flate.Resetter).Reset(io.MultiReader(byteReaderless{bytes.NewReader(message)},
			strings.NewReader("\x00\x00\xff\xff\x01\x00\x00\xff\xff")), nil)
		if _, err := io.ReadFull(fr, buf); err != nil {
			t.Fatal(err)
		}
		held[i] = fr
	}
	each := (heapInUse() - before) / n
	runtime.KeepAlive(held)
	t.Logf("a decompressor in use holds %d bytes; InflateCost is %d", each, session.InflateCost)
	if each > session.InflateCost {
		t.Errorf("a decompressor in use holds %d bytes, more than InflateCost (%d)", each, session.InflateCost)
	}
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
