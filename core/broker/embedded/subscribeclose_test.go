package embedded_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// TestCloseBeforeSubscribeAnswer: when the broker closes a consumer before its answer to the
// subscribe reaches the client, the client takes the close and subscribes again, and the
// consumer goes on receiving. Pulsar does this after a reader's seek: the non-durable
// subscription's cursor, still being closed, takes the reconnected consumer down with it, and
// its CLOSE_CONSUMER can come before the SUCCESS. A client that registers the consumer only on
// the SUCCESS loses the close and waits forever for messages the broker no longer sends it.
func TestCloseBeforeSubscribeAnswer(t *testing.T) {
	t.Run("subscribe", func(t *testing.T) {
		b := startBroker(t, embedded.Config{})
		topic := uniqueTopic("close-before-answer")
		c, closed := relayClient(t, b, 1)
		cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		p := mustProducer(t, newClient(t, b, nil), pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if _, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: []byte("m0")}); err != nil {
			t.Fatal(err)
		}
		m, err := cons.Receive(ctxT(t, 10*time.Second))
		readAfterClose(t, m, err, "m0", closed)
	})
	t.Run("reader seek", func(t *testing.T) {
		b := startBroker(t, embedded.Config{})
		topic := uniqueTopic("close-before-answer-seek")
		p := mustProducer(t, newClient(t, b, nil), pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		var ids []pulsar.MessageID
		for _, s := range []string{"m0", "m1", "m2"} {
			id, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: []byte(s)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		// The seek's reconnection is the reader's second subscribe.
		c, closed := relayClient(t, b, 2)
		r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: ids[1]})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		ctx := ctxT(t, 10*time.Second)
		if m, err := r.Next(ctx); err != nil || string(m.Payload()) != "m2" {
			t.Fatalf("first message: %v, want m2", err)
		}
		if err := r.Seek(ids[0]); err != nil {
			t.Fatal(err)
		}
		m, err := r.Next(ctx)
		readAfterClose(t, m, err, "m1", closed) // after the seek to m0, exclusive
	})
}

// readAfterClose checks what was read once the relay had closed one consumer.
func readAfterClose(t *testing.T, m pulsar.Message, err error, want string, closed *atomic.Int32) {
	t.Helper()
	if err != nil {
		t.Fatalf("nothing read, the broker having closed the consumer before answering its subscribe: %v", err)
	}
	if string(m.Payload()) != want {
		t.Fatalf("read %q, want %q", m.Payload(), want)
	}
	if n := closed.Load(); n != 1 {
		t.Fatalf("the relay closed %d consumers, want 1", n)
	}
}

// relayClient is a client whose connections to b pass through a closingRelay that closes the
// consumer of the nth SUBSCRIBE on the connection, and the count of consumers it closed.
func relayClient(t *testing.T, b *embedded.Broker, nth int) (pulsar.Client, *atomic.Int32) {
	closed := new(atomic.Int32)
	return newClient(t, b, func(o *pulsar.ClientOptions) {
		o.Dialer = func(context.Context, string, string) (net.Conn, error) {
			up, err := b.Connect()
			if err != nil {
				return nil, err
			}
			client, relayEnd := net.Pipe()
			r := &closingRelay{up: up, down: relayEnd, nth: nth, closed: closed,
				closeOn: map[uint64]uint64{}, swallow: map[uint64]bool{}}
			go r.pass(relayEnd, r.upstream)
			go r.pass(up, r.downstream)
			return client, nil
		}
	}), closed
}

// closingRelay passes the frames of one client connection to the broker and back. For the
// nth SUBSCRIBE, it holds the broker's SUCCESS, has the broker close the new consumer
// (answering the close itself), sends the client the broker's CLOSE_CONSUMER and only then the
// SUCCESS.
type closingRelay struct {
	up, down net.Conn
	nth      int
	closed   *atomic.Int32

	upMu       sync.Mutex // writes to up come from both directions
	mu         sync.Mutex
	subscribes int
	closeOn    map[uint64]uint64 // subscribe request id → consumer id to close
	swallow    map[uint64]bool   // request ids of the closes the relay sent
}

// relayCloseID numbers the relay's own requests apart from the client's.
const relayCloseID = 1 << 62

// pass reads the frames from one side until either side fails, handing each to forward.
func (r *closingRelay) pass(from net.Conn, forward func(raw []byte, cmd *pulsarpb.BaseCommand) bool) {
	defer r.closeBoth()
	in := bufio.NewReader(from)
	for {
		raw, cmd, err := readRelayFrame(in)
		if err != nil || !forward(raw, cmd) {
			return
		}
	}
}

// upstream forwards a frame of the client's, counting the SUBSCRIBEs.
func (r *closingRelay) upstream(raw []byte, cmd *pulsarpb.BaseCommand) bool {
	if s := cmd.GetSubscribe(); s != nil {
		r.mu.Lock()
		if r.subscribes++; r.subscribes == r.nth {
			r.closeOn[s.GetRequestId()] = s.GetConsumerId()
		}
		r.mu.Unlock()
	}
	return r.writeUp(raw)
}

// downstream forwards a frame of the broker's: the answer to the chosen SUBSCRIBE after the
// consumer's close, the answer to that close not at all.
func (r *closingRelay) downstream(raw []byte, cmd *pulsarpb.BaseCommand) bool {
	if ok := cmd.GetSuccess(); ok != nil {
		r.mu.Lock()
		consumer, closing := r.closeOn[ok.GetRequestId()]
		delete(r.closeOn, ok.GetRequestId())
		swallowed := r.swallow[ok.GetRequestId()]
		closeReq := relayCloseID + ok.GetRequestId()
		if closing {
			r.swallow[closeReq] = true
		}
		r.mu.Unlock()
		if swallowed {
			return true
		}
		if closing && !r.closeConsumer(consumer, closeReq) {
			return false
		}
	}
	_, err := r.down.Write(raw)
	return err == nil
}

// closeConsumer has the broker close the consumer, then tells the client as the broker would.
func (r *closingRelay) closeConsumer(consumer, req uint64) bool {
	if !r.writeUp(rawpulsar.Command(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_CLOSE_CONSUMER.Enum(),
		CloseConsumer: &pulsarpb.CommandCloseConsumer{ConsumerId: &consumer, RequestId: &req}})) {
		return false
	}
	r.closed.Add(1)
	notice := uint64(math.MaxUint64)
	_, err := r.down.Write(rawpulsar.Command(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_CLOSE_CONSUMER.Enum(),
		CloseConsumer: &pulsarpb.CommandCloseConsumer{ConsumerId: &consumer, RequestId: &notice}}))
	return err == nil
}

func (r *closingRelay) writeUp(b []byte) bool {
	r.upMu.Lock()
	defer r.upMu.Unlock()
	_, err := r.up.Write(b)
	return err == nil
}

func (r *closingRelay) closeBoth() {
	_ = r.up.Close()
	_ = r.down.Close()
}

// readRelayFrame reads one whole frame and decodes its command.
func readRelayFrame(in *bufio.Reader) ([]byte, *pulsarpb.BaseCommand, error) {
	var size [4]byte
	if _, err := io.ReadFull(in, size[:]); err != nil {
		return nil, nil, err
	}
	raw := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(raw, size[:])
	if _, err := io.ReadFull(in, raw[4:]); err != nil {
		return nil, nil, err
	}
	f, _, err := embedded.DecodeFrame(raw, len(raw))
	if err != nil {
		return nil, nil, errors.Join(errors.New("relay"), err)
	}
	return raw, f.Cmd, nil
}
