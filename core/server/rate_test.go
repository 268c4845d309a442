package server_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestMessageRate: past limits.message_rate a producer's messages are handled by the route's
// on_full: rejected at once with an ack naming the limit, or paced (the session stops reading)
// so that every message is sent; every message gets exactly one ack either way.
func TestMessageRate(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
admin_listen: "off"
limits: { message_rate: 10, message_burst: 5 }
routes:
  - { name: paced, match: /ws/v2/producer/persistent/public/paced/**, strategy: { name: hybrid }, on_full: pause, max_pause: 10s }
  - { name: rest, match: /ws/**, strategy: { name: hybrid } }
`)
	const n = 25
	send := func(topic string) (map[string]ack, time.Duration) {
		t.Helper()
		c := edgetest.Dial(t, base+"/ws/v2/producer/persistent/"+topic)
		acks := readAcks(c, n)
		start := time.Now()
		for i := range n {
			if err := c.WriteJSON(message(i, 10)); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]ack{}
		for a := range acks {
			if _, dup := got[a.Context]; dup {
				t.Errorf("context %s acked twice", a.Context)
			}
			got[a.Context] = a
		}
		if len(got) != n {
			t.Fatalf("%d acks for %d messages", len(got), n)
		}
		return got, time.Since(start)
	}
	rejected, _ := send("public/default/rated")
	var refused int
	for _, a := range rejected {
		if a.Result != "ok" {
			refused++
			if !strings.Contains(a.ErrorMsg, "limits.message_rate") {
				t.Errorf("refusal %q does not name the limit", a.ErrorMsg)
			}
		}
	}
	// A burst of 5 and 10 a second: most of 25 messages written at once are refused.
	if refused < n/2 || refused > n-5 {
		t.Errorf("%d of %d refused, want most but not the burst", refused, n)
	}
	mfs := scrape(t, srv.AdminHandler())
	if got := metric(mfs, "sluice_producer_messages_total", "route", "rest", "result", "rejected", "reason", "rate"); got != float64(refused) {
		t.Errorf("rejected for the rate = %v, want the %d refused", got, refused)
	}
	paced, took := send("public/paced/rated")
	for ctx, a := range paced {
		if a.Result != "ok" {
			t.Errorf("paused route: message %s: %s %s", ctx, a.Result, a.ErrorMsg)
		}
	}
	// (25 - 5) messages at 10 a second take at least 2 seconds: the session waited.
	if took < 1900*time.Millisecond {
		t.Errorf("paused route took %s for %d messages, want them paced", took, n)
	}
}

// TestMessageRatePerAddress: the sessions of one client address share
// limits.message_rate_per_address, so opening more of them does not multiply it: four sessions
// writing 20 messages each at once get about the shared burst (twice the rate) through
// between them, the rest refused naming the limit.
func TestMessageRatePerAddress(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `
admin_listen: "off"
limits: { message_rate_per_address: 5 }
`)
	const sessions, n = 4, 20
	var ok, refused int
	for s := range sessions {
		c := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/per-address-"+strconv.Itoa(s))
		acks := readAcks(c, n)
		for i := range n {
			if err := c.WriteJSON(message(i, 10)); err != nil {
				t.Fatal(err)
			}
		}
		for a := range acks {
			switch {
			case a.Result == "ok":
				ok++
			case strings.Contains(a.ErrorMsg, "limits.message_rate_per_address"):
				refused++
			default:
				t.Errorf("ack %+v", a)
			}
		}
	}
	// A burst of 10 and 5 a second; the sessions take a second or two between them.
	if ok+refused != sessions*n || ok < 10 || ok > 30 {
		t.Errorf("%d ok and %d refused of %d messages from one address, want the shared burst (10) and what 5 a second adds", ok, refused, sessions*n)
	}
}
