package broker

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/rawio"
)

// countingConn counts the library's writes that go through WriteBuffers.
type countingConn struct {
	*rawio.Conn
	writes *atomic.Int64
}

func (c countingConn) WriteBuffers(bufs *net.Buffers) (int64, error) {
	c.writes.Add(1)
	return c.Conn.WriteBuffers(bufs)
}

// TestLibraryWritesThroughWriteBuffers: the client library writes its coalesced frames
// through the WriteBuffers of the connection a Dialer returns (patch 37), as it does through
// the connections dialTCP returns, and messages sent so arrive whole and are answered.
func TestLibraryWritesThroughWriteBuffers(t *testing.T) {
	t.Parallel()
	b, _ := startEmbedded(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var writes atomic.Int64
	var once sync.Once
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		nc, err := dialTCP(ctx, network, address)
		if err != nil {
			return nil, err
		}
		rc, ok := nc.(*rawio.Conn)
		if !ok {
			once.Do(func() { t.Log("rawio makes no raw calls here: the library writes through net.Conn") })
			return nc, nil
		}
		return countingConn{Conn: rc, writes: &writes}, nil
	}
	c, err := Dial(Config{URL: b.ServiceURL(), OperationTimeout: 5 * time.Second}, WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p, cons := produceAndConsume(ctx, t, c, ProducerOptions{Topic: "persistent://public/default/write-buffers",
		MaxPendingMessages: 40})
	checkSends(ctx, t, p, cons, 200, 20)
	if !rawio.Raw {
		t.Skip("rawio makes no raw calls here")
	}
	if writes.Load() == 0 {
		t.Fatal("the library wrote nothing through the connection's WriteBuffers")
	}
}
