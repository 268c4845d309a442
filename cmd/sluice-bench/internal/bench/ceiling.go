package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/wsapi"
)

// The ceiling server is the throughput reference with no broker: a bare gorilla WebSocket
// server that does, per producer frame, the work the edge does before and after the broker —
// wsapi.DecodeProducerMessage, a message id encoded, and wsapi.AckOK(…).AppendJSON — and
// writes acks coalesced: every ack ready when the writer wakes leaves in one write. It runs
// as its own process (`sluice-bench ceiling-server`, not listed in the usage) so that it can
// be pinned to the server CPUs like `sluice serve`.

const (
	ceilingCommand   = "ceiling-server"
	ceilingReadyLine = "ceiling server listening on "
	// ceilingQueue bounds the acks a connection holds between its reader and its writer;
	// when it is full the reader waits, and TCP pushes back on the client.
	ceilingQueue = 1024
	// ceilingFlushAt flushes a batch early once it holds this many bytes.
	ceilingFlushAt = 64 << 10
)

func runCeilingServer(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("sluice-bench "+ceilingCommand, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	work := fs.Duration("work", 0, "busy work for each message before its ack")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	cs := newCeilingServer(*work)
	srv := &http.Server{Handler: cs, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(batchListener{ln}) })
	fmt.Fprintf(env.Stdout, "%s%s\n", ceilingReadyLine, ln.Addr())
	<-ctx.Done()
	_ = srv.Close() // closes the listener; hijacked connections are ours:
	cs.closeAll()
	wg.Wait()
	return nil
}

type ceilingServer struct {
	up   websocket.Upgrader
	work time.Duration // busy work for each message, on the reader's goroutine

	mu       sync.Mutex
	conns    map[*websocket.Conn]struct{}
	sessions sync.WaitGroup
}

func newCeilingServer(work time.Duration) *ceilingServer {
	return &ceilingServer{
		up:    websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096, CheckOrigin: func(*http.Request) bool { return true }},
		work:  work,
		conns: map[*websocket.Conn]struct{}{},
	}
}

func (s *ceilingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/ws/v2/producer/") {
		http.NotFound(w, r)
		return
	}
	c, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.sessions.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.sessions.Done()
	}()
	bc, _ := c.NetConn().(*batchConn)
	if bc != nil {
		bc.startBatching()
	}
	serveCeilingConn(c, bc, s.work)
}

func (s *ceilingServer) closeAll() {
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.sessions.Wait()
}

// serveCeilingConn reads frames on this goroutine and writes acks on one it starts and
// joins, as the edge's sessions do. Each message costs work of busy work besides.
func serveCeilingConn(c *websocket.Conn, bc *batchConn, work time.Duration) {
	acks := make(chan []byte, ceilingQueue)
	free := make(chan []byte, ceilingQueue+1)
	var wg sync.WaitGroup
	wg.Go(func() { writeCeilingAcks(c, bc, acks, free) })
	defer func() {
		close(acks)
		wg.Wait()
		_ = c.Close()
	}()
	var frame []byte
	var entry uint64
	for {
		_, r, err := c.NextReader()
		if err != nil {
			return
		}
		frame, err = readAll(r, frame[:0])
		if err != nil {
			return
		}
		var ack wsapi.ProducerAck
		m, ferr := wsapi.DecodeProducerMessage(frame)
		if ferr != nil {
			ack = ferr.Ack()
		} else {
			entry++
			ack = wsapi.AckOK(wsapi.EncodeMessageID(wsapi.NewMessageID(1, entry)), m.Context)
		}
		busy(work)
		var b []byte
		select {
		case b = <-free:
		default:
			b = make([]byte, 0, 128)
		}
		acks <- ack.AppendJSON(b[:0])
	}
}

// busy keeps the CPU busy for d: work that does not wait, as the edge's own work between a
// message and its ack does not.
func busy(d time.Duration) {
	start := time.Now()
	for time.Since(start) < d { //nolint:revive // empty-block: the loop is the work
	}
}

// writeCeilingAcks writes every ack that is ready, then flushes them in one write.
func writeCeilingAcks(c *websocket.Conn, bc *batchConn, acks <-chan []byte, free chan<- []byte) {
	write := func(b []byte) bool {
		err := c.WriteMessage(websocket.TextMessage, b)
		select {
		case free <- b:
		default:
		}
		return err == nil
	}
	for b := range acks {
		ok := write(b)
	more:
		for ok {
			select {
			case b, open := <-acks:
				if !open {
					break more
				}
				ok = write(b)
			default:
				break more
			}
		}
		if bc != nil && bc.flush() != nil {
			ok = false
		}
		if !ok {
			for range acks { // drain, so the reader never blocks on a dead connection
			}
			return
		}
	}
	if bc != nil {
		_ = bc.flush()
	}
}

func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// batchListener hands net/http connections whose writes can be batched.
type batchListener struct{ net.Listener }

func (l batchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &batchConn{Conn: c}, nil
}

// batchConn passes writes straight through until startBatching (the HTTP handshake must
// not wait), then holds them until flush, so that gorilla's one write per message becomes
// one write per batch.
type batchConn struct {
	net.Conn

	mu       sync.Mutex
	batching bool
	buf      []byte
	writes   int64 // writes to the socket while batching, for tests
}

func (c *batchConn) startBatching() {
	c.mu.Lock()
	c.batching = true
	c.mu.Unlock()
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.batching {
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= ceilingFlushAt {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (c *batchConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *batchConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	c.writes++
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}
