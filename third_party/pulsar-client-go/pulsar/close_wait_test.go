// Licensed to the Apache Software Foundation (ASF) under one
// or more contributor license agreements.  See the NOTICE file
// distributed with this work for additional information
// regarding copyright ownership.  The ASF licenses this file
// to you under the Apache License, Version 2.0 (the
// "License"); you may not use this file except in compliance
// with the License.  You may obtain a copy of the License at
//
//   http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing,
// software distributed under the License is distributed on an
// "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
// KIND, either express or implied.  See the License for the
// specific language governing permissions and limitations
// under the License.

package pulsar

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/backoff"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal"
	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

// blockedRedeliverer is a consumer whose redeliveries wait until released, as a consumer's do
// when its events channel is full and its events loop is busy closing it.
type blockedRedeliverer struct {
	entered, release chan struct{}
}

func (b *blockedRedeliverer) Redeliver([]messageID) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
}

// The nack tracker's Close returns while a redelivery of its own waits on the consumer: the
// consumer's events loop closes the tracker, and the redelivery waits for that loop.
func TestNackTrackerCloseDoesNotWaitForItsRedelivery(t *testing.T) {
	rc := &blockedRedeliverer{entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(rc.release)
	tr := newNegativeAcksTracker(rc, 30*time.Millisecond, nil, log.DefaultNopLogger(), ptr(int64(0)))
	tr.Add(&messageID{ledgerID: 1, entryID: 1, batchIdx: -1})
	select {
	case <-rc.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the tracker did not redeliver the negative ack")
	}
	closed := make(chan struct{})
	go func() {
		tr.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a redelivery that waits for the closing consumer")
	}
}

// An event queued once the consumer has closed does not wait on its full events channel, which
// no loop takes from any more.
func TestQueueEventAfterCloseDoesNotBlock(t *testing.T) {
	pc := &partitionConsumer{eventsCh: make(chan interface{}, 1), closeCh: make(chan struct{})}
	pc.eventsCh <- &redeliveryRequest{}
	close(pc.closeCh)
	queued := make(chan struct{})
	go func() {
		pc.queueEvent(&redeliveryRequest{})
		close(queued)
	}()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		t.Fatal("queueEvent waited on the events channel of a closed consumer")
	}
}

// A request queued behind the close, which no loop answers, fails with ConsumerClosed rather
// than being waited on for good; one answered before the close is answered.
func TestAwaitEventAfterClose(t *testing.T) {
	pc := &partitionConsumer{closeCh: make(chan struct{})}
	close(pc.closeCh)
	_, err := awaitEvent(pc, make(chan struct{}))
	var perr *Error
	if !errors.As(err, &perr) || perr.Result() != ConsumerClosed {
		t.Fatalf("awaiting a request no loop answers: %v, want ConsumerClosed", err)
	}
	answered := make(chan error, 1)
	answered <- nil
	if _, err := awaitEvent(pc, answered); err != nil {
		t.Fatalf("awaiting a request answered before the close: %v", err)
	}
}

// refusingClient is a client whose producers are all refused.
type refusingClient struct {
	Client
	creates atomic.Int64
}

func (c *refusingClient) CreateProducer(ProducerOptions) (Producer, error) {
	c.creates.Add(1)
	return nil, errors.New("refused")
}

// quickBackoff retries at once.
type quickBackoff struct{}

func (quickBackoff) Next() time.Duration       { return time.Millisecond }
func (quickBackoff) IsMaxBackoffReached() bool { return false }
func (quickBackoff) Reset()                    {}

// The dead-letter and retry routers, whose producer the broker refuses, stop asking for it
// once closed. They retried for good, with an error logged each time, after their consumer
// had gone.
func TestRoutersStopCreatingTheirProducerOnClose(t *testing.T) {
	policy := &DLQPolicy{MaxDeliveries: 1, DeadLetterTopic: "dlq", RetryLetterTopic: "retry"}
	quick := func() backoff.Policy { return quickBackoff{} }
	cm := ConsumerMessage{Consumer: &consumer{}, Message: &message{}}
	t.Run("dead letter", func(t *testing.T) {
		c := &refusingClient{}
		r, err := newDlqRouter(c, policy, "t", "s", "c", quick, log.DefaultNopLogger())
		if err != nil {
			t.Fatal(err)
		}
		r.Chan() <- cm
		expectStopsOnClose(t, c, r.close)
	})
	t.Run("retry", func(t *testing.T) {
		c := &refusingClient{}
		r, err := newRetryRouter(c, policy, true, quick, log.DefaultNopLogger())
		if err != nil {
			t.Fatal(err)
		}
		r.Chan() <- RetryMessage{consumerMsg: cm}
		expectStopsOnClose(t, c, r.close)
	})
}

// expectStopsOnClose waits for c to refuse a few producers, closes the router, and checks
// that it asks for none after.
func expectStopsOnClose(t *testing.T, c *refusingClient, closeRouter func()) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.creates.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling a counter, not synchronizing
	}
	closeRouter()
	time.Sleep(50 * time.Millisecond) // a retry under way when the router closed ends
	stopped := c.creates.Load()
	time.Sleep(100 * time.Millisecond)
	if got := c.creates.Load(); got != stopped {
		t.Fatalf("the closed router asked for its producer %d more times", got-stopped)
	}
}

// The consumer of one topic of a pattern consumer, closed when its topic goes, leaves the
// routers it shares with the other topics' consumers running: it closed them, and the others'
// dispatchers then waited for good on a dead-letter router that no longer took messages.
func TestConsumerLeavesSharedRoutersRunning(t *testing.T) {
	cl, err := NewClient(ClientOptions{URL: "pulsar://127.0.0.1:1", DisableMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rc := &refusingClient{}
	r, err := newDlqRouter(rc, &DLQPolicy{MaxDeliveries: 1, DeadLetterTopic: "dlq"}, "t", "s", "c",
		func() backoff.Policy { return quickBackoff{} }, log.DefaultNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	rlq, err := newRetryRouter(rc, nil, false, nil, log.DefaultNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	c := &consumer{client: cl.(*client), closeCh: make(chan struct{}), dlq: r, rlq: rlq, routersShared: true,
		stopDiscovery: func() {}, metrics: cl.(*client).metrics.GetLeveledMetrics("t")}
	c.Close()
	select {
	case r.Chan() <- ConsumerMessage{Consumer: &consumer{}, Message: &message{}}:
	case <-time.After(5 * time.Second):
		t.Fatal("the shared dead-letter router stopped with one of its consumers")
	}
}

// answeringConn answers every request at once with SUCCESS.
type answeringConn struct{ internal.Connection }

func (answeringConn) SendRequest(_ uint64, _ *pb.BaseCommand, cb func(*pb.BaseCommand, error)) {
	cb(&pb.BaseCommand{Type: pb.BaseCommand_SUCCESS.Enum()}, nil)
}
func (answeringConn) DeleteConsumeHandler(uint64) {}

// A consumer made ready whose creation then fails (the last message id or the seek of a reader
// from the latest message inclusive) is closed before its events loop has been started: the
// close must start it, or it waits for good for a loop that nothing starts.
func TestCloseOfAConsumerNotStarted(t *testing.T) {
	cl, err := NewClient(ClientOptions{URL: "pulsar://127.0.0.1:1", DisableMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := cl.(*client)
	ctx, cancel := context.WithCancel(context.Background())
	pc := &partitionConsumer{client: c, options: &partitionConsumerOpts{},
		eventsCh: make(chan interface{}, 10), closeCh: make(chan struct{}),
		connectClosedCh: make(chan *connectionClosed, 1), log: log.DefaultNopLogger(),
		metrics: c.metrics.GetLeveledMetrics("t"), ctx: ctx, cancelFunc: cancel,
		ackGroupingTracker: &immediateAckGroupingTracker{}}
	pc.chunkedMsgCtxMap = newChunkedMsgCtxMap(1, pc)
	pc._setConn(answeringConn{})
	pc.eventsRunning.Store(true) // as newPartitionConsumer sets it until its loop starts
	pc.setConsumerState(consumerReady)
	closed := make(chan struct{})
	go func() {
		pc.closeUnstarted()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the close waited for an events loop that nothing started")
	}
	if pc.getConsumerState() != consumerClosed {
		t.Fatalf("consumer state %v after the close, want closed", pc.getConsumerState())
	}
}

// What is handed to the dispatcher once the consumer has closed, and its dispatcher ended for
// good, is given up rather than waited on for good: the news of a new connection, a seek's
// pause, the clearing of its queue.
func TestHandToAnEndedDispatcher(t *testing.T) {
	pc := &partitionConsumer{closeCh: make(chan struct{}), dispatcherSeekingControlCh: make(chan struct{}),
		clearQueueCh: make(chan func(*trackingMessageID))}
	pc.dispatching.Store(true) // a dispatcher that ended on the close leaves it set
	close(pc.closeCh)
	pc.setConsumerState(consumerReady) // the close's state not seen yet
	done := make(chan struct{})
	go func() {
		pc.pauseDispatchMessage()
		if id := pc.clearQueueAndGetNextMessage(); id != nil {
			t.Errorf("cleared queue of a closed consumer gave %v", id)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a hand-off to the closed consumer's ended dispatcher waited for good")
	}
}

// Asking a closed consumer for its last message id fails at once, rather than being retried,
// each attempt failing, until the operation timeout.
func TestLastMessageIDOfAClosedConsumer(t *testing.T) {
	cl, err := NewClient(ClientOptions{URL: "pulsar://127.0.0.1:1", DisableMetrics: true, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pc := &partitionConsumer{client: cl.(*client), eventsCh: make(chan interface{}, 10), closeCh: make(chan struct{}),
		log: log.DefaultNopLogger(), backoffPolicyFunc: func() backoff.Policy { return quickBackoff{} }}
	pc.eventsRunning.Store(true) // the loop ended on the close
	close(pc.closeCh)
	pc.setConsumerState(consumerReady) // the close's state not seen yet
	start := time.Now()
	if _, err := pc.getLastMessageIDAndMarkDeletePosition(); err == nil {
		t.Fatal("a closed consumer gave a last message id")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a closed consumer's last message id failed after %v", d)
	}
}
