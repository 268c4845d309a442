package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/testkit"
)

// process is `sluice serve` running as a subprocess: the test binary running main.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *testkit.SyncBuffer
	exited         chan struct{}
	err            error // Wait's, once exited is closed

	addr, admin, brokerAdmin string
}

// helpEnd ends serve's connect help: every address is printed before it.
const helpEnd = "Press Ctrl-C to stop."

var (
	adminRE       = regexp.MustCompile(`Admin: https?://(\S+)/ `)
	brokerAdminRE = regexp.MustCompile(`\(admin http://(\S+)\)`)
)

// startProcess runs `sluice serve -c file` in a subprocess, its environment this one's with env
// added, and waits for its addresses. It is killed when the test ends if it is still running.
func startProcess(t *testing.T, file string, env ...string) *process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(exe, mainArg, "serve", "-c", file)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.Env = append(append(os.Environ(), "GOMEMLIMIT=off"), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("serve stderr:\n%s", p.stderr.String())
		}
	})
	deadline := time.Now().Add(45 * time.Second)
	for {
		out := p.stdout.String()
		m, a := listeningRE.FindStringSubmatch(out), adminRE.FindStringSubmatch(out)
		if m != nil && a != nil && strings.Contains(out, helpEnd) {
			p.addr, p.admin = m[1], a[1]
			if b := brokerAdminRE.FindStringSubmatch(out); b != nil {
				p.brokerAdmin = b[1]
			}
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("serve exited: %v\n%s", p.err, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", p.stderr.String())
		}
	}
}

func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("serve still running after %s", timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// get fetches http://addr+path and returns the status and body.
func get(addr, path string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func post(t *testing.T, addr, path string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post("http://"+addr+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}

// inFlight is the producer messages /stats says are in flight.
func inFlight(addr string) int64 {
	_, body, err := get(addr, "/stats")
	if err != nil {
		return -1
	}
	var st struct {
		Routes []struct {
			InFlight int64 `json:"in_flight"`
		} `json:"routes"`
	}
	if json.Unmarshal([]byte(body), &st) != nil {
		return -1
	}
	var n int64
	for _, r := range st.Routes {
		n += r.InFlight
	}
	return n
}

type wsAck struct {
	Result  string `json:"result"`
	Context string `json:"context"`
}

// producerWithHeld opens a producer, sends n messages while the broker holds receipts, and
// waits until all n are in flight. It returns the connection and a channel of what it reads:
// acks, then the close error.
func producerWithHeld(t *testing.T, p *process, topic string, n int) (*websocket.Conn, <-chan wsAck, chan error) {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws/v2/producer/persistent/public/default/"+topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	acks := make(chan wsAck, n)
	end := make(chan error, 1)
	go func() {
		for {
			var a wsAck
			if err := c.ReadJSON(&a); err != nil {
				end <- err
				return
			}
			acks <- a
		}
	}()
	for i := range n {
		m := map[string]string{"payload": base64.StdEncoding.EncodeToString([]byte("m-" + strconv.Itoa(i))), "context": strconv.Itoa(i)}
		if err := c.WriteJSON(m); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "every message in flight", func() bool { return inFlight(p.admin) == int64(n) })
	return c, acks, end
}

func shutdownConfig(t *testing.T, extra string) string {
	dir := t.TempDir()
	return writeFile(t, dir, "sluice.yaml", `
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
log: { format: json }
broker: { embedded: { admin_listen: "127.0.0.1:0" } }
`+extra)
}

// SIGTERM with messages in flight and their receipts held: /readyz answers 503 at once, new
// sessions are still accepted during the grace period and refused after it, the receipts
// released during the drain reach the client as ok acks, the session closes with 1001 and
// the process exits 0. Every message is answered.
func TestSIGTERMDrainsMessagesInFlight(t *testing.T) {
	t.Parallel()
	const grace = 1500 * time.Millisecond
	p := startProcess(t, shutdownConfig(t, "shutdown: { grace_period: 1500ms, drain_timeout: 20s }\n"))
	post(t, p.brokerAdmin, "/faults/hold-receipts")
	const n = 50
	_, acks, end := producerWithHeld(t, p, "drain-"+strconv.FormatInt(time.Now().UnixNano(), 10), n)

	p.signal(t, syscall.SIGTERM)
	start := time.Now()
	testkit.WaitFor(t, grace, "/readyz 503 within the grace period", func() bool {
		code, _, _ := get(p.admin, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	if code, _, _ := get(p.addr, "/readyz"); code != http.StatusServiceUnavailable && time.Since(start) < grace {
		t.Errorf("/readyz on the WebSocket listener during the grace period: %d", code)
	}
	// Still serving: a new session opens during the grace period.
	if c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws/v2/reader/persistent/public/default/grace", nil); err != nil {
		if time.Since(start) < grace {
			t.Errorf("handshake %s into the grace period: %v", time.Since(start), err)
		}
	} else {
		_ = c.Close()
	}
	select {
	case a := <-acks:
		t.Fatalf("ack while receipts are held: %+v", a)
	case <-time.After(time.Until(start.Add(grace + 500*time.Millisecond))):
	}
	// After the grace period the listener is closed.
	if c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws/v2/reader/persistent/public/default/late", nil); err == nil {
		_ = c.Close()
		t.Errorf("handshake accepted %s after SIGTERM, past the grace period", time.Since(start))
	}
	post(t, p.brokerAdmin, "/faults/release-receipts")
	got := map[string]string{}
	for len(got) < n {
		select {
		case a := <-acks:
			if got[a.Context] != "" {
				t.Fatalf("second ack for %s", a.Context)
			}
			got[a.Context] = a.Result
		case err := <-end:
			for a := range drainAcks(acks) {
				got[a.Context] = a.Result
			}
			if len(got) < n {
				t.Fatalf("connection ended after %d of %d acks: %v", len(got), n, err)
			}
			end <- err
		case <-time.After(15 * time.Second):
			t.Fatalf("%d of %d acks", len(got), n)
		}
	}
	for ctx, r := range got {
		if r != "ok" {
			t.Errorf("message %s: %s, want ok", ctx, r)
		}
	}
	if err := <-end; websocketCode(err) != websocket.CloseGoingAway {
		t.Errorf("the session ended with %v, want 1001", err)
	}
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if !strings.Contains(p.stderr.String(), `"close_reason":"server shutting down"`) {
		t.Errorf("no session closed by the shutdown in the log:\n%s", p.stderr.String())
	}
}

// Past the drain timeout, messages whose receipts never come are answered with error acks
// (the broker client is closed under them): none is dropped silently.
func TestSIGTERMDrainTimeoutAnswersEveryMessage(t *testing.T) {
	t.Parallel()
	p := startProcess(t, shutdownConfig(t, "shutdown: { drain_timeout: 1s }\n"))
	post(t, p.brokerAdmin, "/faults/hold-receipts")
	const n = 30
	_, acks, end := producerWithHeld(t, p, "timeout-"+strconv.FormatInt(time.Now().UnixNano(), 10), n)
	p.signal(t, syscall.SIGTERM)
	got := map[string]string{}
	for len(got) < n {
		select {
		case a := <-acks:
			got[a.Context] = a.Result
		case err := <-end:
			for a := range drainAcks(acks) {
				got[a.Context] = a.Result
			}
			if len(got) < n {
				t.Fatalf("connection ended after %d of %d acks: %v", len(got), n, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d acks", len(got), n)
		}
	}
	for ctx, r := range got {
		if !strings.HasPrefix(r, "send-error") {
			t.Errorf("message %s: %q, want an error ack (its receipt never came)", ctx, r)
		}
	}
	p.wait(t, 20*time.Second)
}

// A second signal during the drain exits at once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	p := startProcess(t, shutdownConfig(t, "shutdown: { grace_period: 30s }\n"))
	p.signal(t, syscall.SIGTERM)
	testkit.WaitFor(t, 20*time.Second, "draining", func() bool {
		code, _, _ := get(p.admin, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	start := time.Now()
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 5*time.Second); code != 1 {
		t.Errorf("exit status %d after a second signal, want 1", code)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("exited %s after the second signal", d)
	}
}

// SIGHUP reloads the configuration at once (routes and log.level) and the process goes on; a
// bad file keeps the routes in force and is counted as a failed reload.
func TestSIGHUPReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Every version of the file has the same size and modification time, so the file watcher,
	// which looks at those first, never sees a change: only SIGHUP can load one.
	const size = 256
	stamp := time.Unix(1_700_000_000, 0)
	write := func(routes string) string {
		text := "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\nroutes:\n" + routes + "#"
		if len(text) > size {
			t.Fatalf("configuration longer than %d bytes", size)
		}
		tmp := dir + "/sluice.yaml.tmp"
		if err := os.WriteFile(tmp, []byte(text+strings.Repeat("#", size-len(text))), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, stamp, stamp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dir+"/sluice.yaml"); err != nil {
			t.Fatal(err)
		}
		return dir + "/sluice.yaml"
	}
	file := write("  - { name: first, match: /ws/**, strategy: { name: bytes } }\n")
	p := startProcess(t, file)
	type reloads struct {
		routes            string
		reloads, failures int
	}
	now := func() reloads {
		_, body, _ := get(p.admin, "/stats")
		var st struct {
			Routes []struct{ Name string } `json:"routes"`
			Config struct {
				Reloads        int `json:"reloads"`
				ReloadFailures int `json:"reload_failures"`
			} `json:"config"`
		}
		_ = json.Unmarshal([]byte(body), &st)
		var names []string
		for _, r := range st.Routes {
			names = append(names, r.Name)
		}
		return reloads{strings.Join(names, ","), st.Config.Reloads, st.Config.ReloadFailures}
	}
	loadedAtStart := lastReloadSuccess(t, p.admin)
	write("  - { name: second, match: /ws/**, strategy: { name: count } }\nlog: { level: debug }\n")
	p.signal(t, syscall.SIGHUP)
	testkit.WaitFor(t, 20*time.Second, "the routes reloaded by SIGHUP", func() bool {
		r := now()
		return r.routes == "second" && r.reloads >= 1 && r.failures == 0
	})
	testkit.WaitFor(t, 20*time.Second, "the new log level applied", func() bool {
		return strings.Contains(p.stderr.String(), `msg="log level changed" level=DEBUG`)
	})
	reloaded := lastReloadSuccess(t, p.admin)
	if !(reloaded > loadedAtStart) {
		t.Errorf("sluice_config_last_reload_success_timestamp_seconds %v after the reload, want later than at start (%v)", reloaded, loadedAtStart)
	}
	write("  - { name: broken, match: /ws/**, strategy: { name: nosuch } }\n")
	p.signal(t, syscall.SIGHUP)
	testkit.WaitFor(t, 20*time.Second, "the failed reload counted", func() bool {
		r := now()
		return r.routes == "second" && r.failures >= 1
	})
	if code, _, _ := get(p.admin, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the reloads: %d", code)
	}
	select {
	case <-p.exited:
		t.Fatalf("serve exited on SIGHUP: %v", p.err)
	default:
	}
	_, metrics, _ := get(p.admin, "/metrics")
	for _, want := range []string{`sluice_config_reloads_total{result="success"} `, `sluice_config_reloads_total{result="failure"} `, "sluice_config_last_reload_successful 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if got := lastReloadSuccess(t, p.admin); got != reloaded {
		t.Errorf("sluice_config_last_reload_success_timestamp_seconds %v after a failed reload, want it left at %v", got, reloaded)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

var lastReloadRE = regexp.MustCompile(`(?m)^sluice_config_last_reload_success_timestamp_seconds (\S+)$`)

// lastReloadSuccess reads sluice_config_last_reload_success_timestamp_seconds from /metrics.
func lastReloadSuccess(t *testing.T, addr string) float64 {
	t.Helper()
	_, body, err := get(addr, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m := lastReloadRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("/metrics lacks sluice_config_last_reload_success_timestamp_seconds")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// drainAcks yields the acks already read (the reader sends every ack before the end).
func drainAcks(acks <-chan wsAck) <-chan wsAck {
	out := make(chan wsAck, cap(acks))
	for {
		select {
		case a := <-acks:
			out <- a
			continue
		default:
		}
		close(out)
		return out
	}
}

func websocketCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

// wsMessage is a consumer's or reader's message frame.
type wsMessage struct {
	MessageID string `json:"messageId"`
	Payload   string `json:"payload"`
}

// readMessages reads n message frames from c, failing the test on any error.
func readMessages(t *testing.T, c *websocket.Conn, n int) []wsMessage {
	t.Helper()
	out := make([]wsMessage, 0, n)
	for range n {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		var m wsMessage
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("message %d of %d: %v", len(out), n, err)
		}
		out = append(out, m)
	}
	_ = c.SetReadDeadline(time.Time{})
	return out
}

// payloadOf decodes a message frame's payload.
func payloadOf(t *testing.T, m wsMessage) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// publishWS sends payloads through a producer session on addr and waits for their ok acks.
func publishWS(t *testing.T, addr, topic string, payloads ...string) {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws/v2/producer/persistent/public/default/"+topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, p := range payloads {
		m := map[string]string{"payload": base64.StdEncoding.EncodeToString([]byte(p)), "context": strconv.Itoa(i)}
		if err := c.WriteJSON(m); err != nil {
			t.Fatal(err)
		}
	}
	for range payloads {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		var a wsAck
		if err := c.ReadJSON(&a); err != nil || a.Result != "ok" {
			t.Fatalf("publish to %s: %+v %v", topic, a, err)
		}
	}
}

// consumerAcks is the consumer acks /stats counts over every route.
func consumerAcks(addr string) int64 {
	_, body, err := get(addr, "/stats")
	if err != nil {
		return -1
	}
	var st struct {
		Routes []struct {
			Consumer struct {
				Acks int64 `json:"acks"`
			} `json:"consumer"`
		} `json:"routes"`
	}
	if json.Unmarshal([]byte(body), &st) != nil {
		return -1
	}
	var n int64
	for _, r := range st.Routes {
		n += r.Consumer.Acks
	}
	return n
}
