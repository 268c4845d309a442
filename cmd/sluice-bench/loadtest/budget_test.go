//go:build load

package loadtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// The memory budget phase: each of the worst client behaviours against an edge of its own,
// whose peak resident memory (VmHWM) must stay within memory.limit plus a tenth.
const (
	budgetMiB   = 160
	budgetSlack = 1.10
	// budgetHold is how long each behaviour lasts.
	budgetHold = 6 * time.Second

	// The flood against a stalled broker: producers, each with up to floodWindow messages of
	// floodSize in flight, before and while the broker is stopped.
	floodProducers = 20
	floodWindow    = 64
	floodSize      = 64 << 10
	// Consumers that never read: sessions on a topic each, with a backlog of deafBacklog
	// messages of floodSize each.
	deafConsumers = 20
	deafBacklog   = 200
	// Idle connections opened from one address.
	budgetIdle = 10000
	// Max-size frames: producers, each with up to 2 messages of websocket.max_message_size
	// (5 MiB) in flight.
	bigProducers = 10
)

// memoryBudget: an edge with memory.limit 160MiB against `sluice broker`, under a producer
// flood while the broker is stopped (SIGSTOP), consumers that never read, thousands of idle
// connections, and frames of the largest size; every message is answered, and the peak RSS
// stays within the budget plus 10%.
func memoryBudget(t *testing.T) {
	for _, b := range []struct {
		name string
		cfg  string
		run  func(t *testing.T, e budgetEdge) string
	}{
		{"flood against a stalled broker", "", floodStalledBroker},
		// The broker client's prefetch is bounded in bytes by each session's share of the
		// consumer pool (docs/backpressure.md, "The consumer side's worst case"), so sessions
		// that never read hold as little in the library at the default prefetch of 100
		// messages as at 10.
		{"consumers that never read", "", deafConsumersBehaviour},
		{"consumers that never read, prefetch 10", "routes: [ { name: all, match: /ws/**, strategy: { name: hybrid, params: { prefetch: 10 } } } ]\n", deafConsumersBehaviour},
		{"idle connections", "", idleBudget},
		{"max-size frames", "", maxSizeFrames},
	} {
		t.Run(b.name, func(t *testing.T) {
			e := startBudgetEdge(t, b.cfg)
			what := b.run(t, e)
			hwm := statusKiB(t, e.serve.cmd.Process.Pid, "VmHWM")
			limit := int64(float64(budgetMiB<<10) * budgetSlack)
			t.Logf("FIGURE memory budget, %s: peak RSS (VmHWM) %.1f MiB of memory.limit %d MiB (%.0f%%); %s",
				b.name, float64(hwm)/1024, budgetMiB, 100*float64(hwm)/float64(budgetMiB<<10), what)
			if hwm > limit {
				t.Errorf("%s: peak RSS %.1f MiB over memory.limit %d MiB + 10%%", b.name, float64(hwm)/1024, budgetMiB)
			}
		})
	}
}

// budgetEdge is an edge with memory.limit budgetMiB and the broker it uses.
type budgetEdge struct {
	serve                  *proc
	broker                 *proc
	brokerAddr, base, admn string
}

// startBudgetEdge starts a broker and an edge with the budget and the YAML lines cfg.
func startBudgetEdge(t *testing.T, cfg string) budgetEdge {
	t.Helper()
	broker, brokerAddr, _ := startBroker(t, "--store-limit", "512MiB", "--namespace-backlog-quota", "512MiB")
	serve, edge, admin := startEdge(t, "serve-budget.log", brokerAddr,
		fmt.Sprintf("memory: { limit: %dMiB }\nlimits: { max_connections: 20000 }\n", budgetMiB)+cfg)
	return budgetEdge{serve: serve, broker: broker, brokerAddr: brokerAddr, base: "ws://" + edge, admn: admin}
}

// statusKiB is a field of /proc/PID/status in KiB (VmRSS, VmHWM).
func statusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// floodStalledBroker: producers flood the edge; the broker is stopped with SIGSTOP, so that
// it accepts and never answers, while they go on; it is resumed, and every message is
// answered.
func floodStalledBroker(t *testing.T, e budgetEdge) string {
	d := &websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	var rwg, swg sync.WaitGroup
	stop := make(chan struct{})
	ps := make([]*producer, floodProducers)
	body := pad(floodSize)
	for i := range ps {
		ps[i] = newProducer(t, d, e.base, fmt.Sprintf("persistent/public/default/flood-%d", i%5), i, &rwg)
		swg.Add(1)
		go ps[i].flood(stop, &swg, "f", floodWindow, 0, 0, body)
	}
	time.Sleep(time.Second) // deliberately: the flood runs against a live broker first
	pid := e.broker.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	time.Sleep(budgetHold)
	close(stop)
	swg.Wait()
	stalled := tallyOf(ps)
	resume()
	waitAnswered(t, ps, answerWait)
	s := tallyOf(ps)
	for _, p := range ps {
		p.conn.Close()
	}
	rwg.Wait()
	checkAnswered(t, s)
	return fmt.Sprintf("%d messages of %d KiB sent, %d answered while the broker was stopped, then %d acknowledged ok, %d error acks",
		s.sent, floodSize>>10, stalled.ok+stalled.errs+stalled.anon, s.ok, s.errs+s.anon)
}

// deafConsumersBehaviour: consumer sessions whose clients never read, each on a topic with a
// backlog published straight to the broker.
func deafConsumersBehaviour(t *testing.T, e budgetEdge) string {
	d := &websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conns := make([]*websocket.Conn, deafConsumers)
	for i := range conns {
		c, resp, err := d.Dial(fmt.Sprintf("%s/ws/v2/consumer/persistent/public/default/deaf-%d/s", e.base, i), nil)
		if err != nil {
			t.Fatalf("consumer %d: %v: %s", i, err, dialStatus(resp))
		}
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	pc := pulsarClient(t, e.brokerAddr)
	defer pc.Close()
	body := pad(floodSize)
	var wg sync.WaitGroup
	var pubErr atomic.Value
	for i := range deafConsumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: fmt.Sprintf("public/default/deaf-%d", i)})
			if err != nil {
				pubErr.CompareAndSwap(nil, err.Error())
				return
			}
			defer p.Close()
			for range deafBacklog {
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: body}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						pubErr.CompareAndSwap(nil, err.Error())
					}
				})
			}
			if err := p.FlushWithCtx(context.Background()); err != nil {
				pubErr.CompareAndSwap(nil, err.Error())
			}
		}()
	}
	wg.Wait()
	if v := pubErr.Load(); v != nil {
		t.Fatalf("publishing the backlog: %v", v)
	}
	time.Sleep(budgetHold)
	return fmt.Sprintf("%d sessions that never read, backlog %d MiB (%d messages of %d KiB); consumer pool %.1f MiB",
		deafConsumers, deafConsumers*deafBacklog*floodSize>>20, deafConsumers*deafBacklog, floodSize>>10,
		poolUsed(t, e.admn, "consumer_pool")/(1<<20))
}

// idleBudget: idle producer connections from one address until budgetIdle were tried; those
// past the session pool are refused with 503.
func idleBudget(t *testing.T, e budgetEdge) string {
	d := &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}
	conns := make([]*websocket.Conn, budgetIdle)
	var next, refused atomic.Int64
	var other atomic.Value
	var wg sync.WaitGroup
	for range dialWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= budgetIdle {
					return
				}
				c, resp, err := d.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/idle-%d", e.base, i%topics), nil)
				switch {
				case err == nil:
					conns[i] = c
				case resp != nil && resp.StatusCode == 503:
					refused.Add(1)
				default:
					other.CompareAndSwap(nil, fmt.Sprintf("%v: %s", err, dialStatus(resp)))
				}
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if v := other.Load(); v != nil {
		t.Errorf("an idle connection failed otherwise than with 503: %v", v)
	}
	time.Sleep(2 * time.Second) // deliberately: the process settles with the connections open
	return fmt.Sprintf("%d idle producer connections tried, %d refused with 503; session pool %.1f MiB",
		budgetIdle, refused.Load(), poolUsed(t, e.admn, "session_pool")/(1<<20))
}

// maxSizeFrames: producers send messages of websocket.max_message_size (5 MiB, frames of
// 6.7 MiB) as fast as two in flight each allow.
func maxSizeFrames(t *testing.T, e budgetEdge) string {
	d := &websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	var rwg, swg sync.WaitGroup
	stop := make(chan struct{})
	ps := make([]*producer, bigProducers)
	body := pad(5<<20 - 64) // the context and "|" make up the rest of 5 MiB
	// Every producer is open before any floods: a handshake after the floods have filled the
	// session pool is refused (fair share), which is the pool working, not what this measures.
	for i := range ps {
		ps[i] = newProducer(t, d, e.base, fmt.Sprintf("persistent/public/default/big-%d", i%5), i, &rwg)
	}
	for _, p := range ps {
		swg.Add(1)
		go p.flood(stop, &swg, "b", 2, 0, 0, body)
	}
	time.Sleep(budgetHold)
	close(stop)
	swg.Wait()
	waitAnswered(t, ps, answerWait)
	s := tallyOf(ps)
	for _, p := range ps {
		p.conn.Close()
	}
	rwg.Wait()
	checkAnswered(t, s)
	return fmt.Sprintf("%d messages of 5 MiB sent, %d acknowledged ok, %d error acks (%d of them to frames refused unread, without a context)",
		s.sent, s.ok, s.errs+s.anon, s.anon)
}

// checkAnswered: every message got one answer, an error ack without a context (a frame
// refused unread) answering one of those whose context got none.
func checkAnswered(t *testing.T, s tally) {
	t.Helper()
	if s.unanswered != s.anon || s.dups > 0 || s.lostConns > 0 {
		t.Errorf("%d unanswered, %d error acks without a context, %d double acks, %d connections lost", s.unanswered, s.anon, s.dups, s.lostConns)
	}
}
