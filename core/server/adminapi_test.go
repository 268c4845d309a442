package server_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/core/wsapi"
)

// adminDo makes one request to an admin API and returns its status and body.
func adminDo(t *testing.T, hc *http.Client, method, u string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// The admin listener with admin_auth: the probes and the dashboard's assets are open; every
// other endpoint answers 401 without valid credentials and 403 to a role that is not a
// super-user, with Pulsar's JSON error body, and serves a super-user's token or client
// certificate.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	caFile := ca.Write(t, dir, "ca")
	srv, _ := edgetest.Listen(t, fmt.Sprintf(`
admin_listen: "127.0.0.1:0"
admin_tls: { cert_file: %s, key_file: %s, client_ca_file: %s }
admin_auth: { enabled: true, super_user_roles: [ops] }
auth: { token: { secret_key_file: %s }, anonymous_role: guest }
`, certFile, keyFile, caFile, tokens.SecretFile))
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs}}}
	}
	base := "https://" + srv.AdminAddr()
	ops, alice := ca.Client(t, pkix.Name{CommonName: "ops"}), ca.Client(t, pkix.Name{CommonName: "alice"})
	for name, tc := range map[string]struct {
		hc     *http.Client
		method string
		path   string
		header http.Header
		want   int
	}{
		"healthz is open":                       {client(), "GET", "/healthz", nil, 200},
		"readyz is open":                        {client(), "GET", "/readyz", nil, 200},
		"the dashboard page is open":            {client(), "GET", "/", nil, 200},
		"its script is open":                    {client(), "GET", "/dashboard/dashboard.js", nil, 200},
		"stats without credentials":             {client(), "GET", "/stats", nil, 401},
		"metrics without credentials":           {client(), "GET", "/metrics", nil, 401},
		"sessions without credentials":          {client(), "GET", "/sessions", nil, 401},
		"close without credentials":             {client(), "DELETE", "/sessions/1", nil, 401},
		"proxy-stats without credentials":       {client(), "GET", "/admin/v2/proxy-stats/stats", nil, 401},
		"a bad token":                           {client(), "GET", "/stats", bearer("not-a-token"), 401},
		"a token of another key":                {client(), "GET", "/stats", bearer(strings.Repeat("x", 20) + ".e30.sig"), 401},
		"alice's token":                         {client(), "GET", "/stats", bearer(tokens.Token(t, "alice")), 403},
		"ops's token":                           {client(), "GET", "/stats", bearer(tokens.Token(t, "ops")), 200},
		"ops's token in the query":              {client(), "GET", "/stats?token=" + tokens.Token(t, "ops"), nil, 200},
		"ops's token on metrics":                {client(), "GET", "/metrics", bearer(tokens.Token(t, "ops")), 200},
		"ops's certificate":                     {client(ops.TLSCert), "GET", "/sessions", nil, 200},
		"alice's certificate":                   {client(alice.TLSCert), "GET", "/sessions", nil, 403},
		"alice's certificate, ops's token":      {client(alice.TLSCert), "GET", "/stats", bearer(tokens.Token(t, "ops")), 200},
		"ops closes a session that is not open": {client(ops.TLSCert), "DELETE", "/sessions/999999", nil, 404},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			status, body := adminDo(t, tc.hc, tc.method, base+tc.path, tc.header)
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, body, tc.want)
			}
			if status == 401 || status == 403 {
				var e struct{ Reason string }
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Reason == "" {
					t.Errorf("body %q: want Pulsar's {\"reason\": …}", body)
				}
			}
		})
	}
}

// admin_auth.open_metrics leaves /metrics to scrapers without a token; the rest still needs
// one.
func TestAdminAuthOpenMetrics(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	srv, _ := edgetest.Start(t, tokens.YAML()+`
authorization: { enabled: true, super_user_roles: [ops] }
admin_auth: { enabled: true, open_metrics: true }
`)
	hs := httptest.NewServer(srv.AdminHandler())
	defer hs.Close()
	hc := hs.Client()
	for path, want := range map[string]int{"/metrics": 200, "/stats": 401, "/stats/history": 401, "/healthz": 200} {
		if status, body := adminDo(t, hc, "GET", hs.URL+path, nil); status != want {
			t.Errorf("GET %s: %d (%s), want %d", path, status, body, want)
		}
	}
	if status, _ := adminDo(t, hc, "GET", hs.URL+"/stats/history", bearer(tokens.Token(t, "ops"))); status != 200 {
		t.Errorf("GET /stats/history with ops's token: %d, want 200", status)
	}
}

// A client's token, sent in the token query parameter or the Authorization header, appears in
// no admin answer: not in /sessions, one session, /stats, the history, proxy-stats, the
// metrics or the dashboard.
func TestAdminNeverShowsTokens(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	srv, base := edgetest.Start(t, tokens.YAML())
	inQuery, inHeader := tokens.Token(t, "carol"), tokens.Token(t, "dave")
	topic := "public/default/tokens-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/"+topic+"?token="+url.QueryEscape(inQuery))
	c, _, err := websocket.DefaultDialer.Dial(base+"/ws/v2/consumer/persistent/"+topic+"/sub", bearer(inHeader))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs := httptest.NewServer(srv.AdminHandler())
	defer hs.Close()
	var page admin.SessionPage
	edgetest.WaitFor(t, 10*time.Second, "both sessions listed", func() bool {
		_, body := adminDo(t, hs.Client(), "GET", hs.URL+"/sessions", nil)
		return json.Unmarshal([]byte(body), &page) == nil && page.Total == 2
	})
	paths := []string{"/sessions", "/stats", "/stats/history", "/metrics", "/", "/dashboard/dashboard.js",
		"/admin/v2/proxy-stats/stats", "/admin/v2/proxy-stats/metrics", "/admin/v2/proxy-stats/persistent/" + topic + "/stats",
		"/sessions?role=carol", "/sessions?role=dave"}
	for _, s := range page.Sessions {
		paths = append(paths, "/sessions/"+strconv.FormatUint(s.ID, 10))
	}
	for _, p := range paths {
		status, body := adminDo(t, hs.Client(), "GET", hs.URL+p, nil)
		if status != 200 {
			t.Errorf("GET %s: %d", p, status)
		}
		for _, tok := range []string{inQuery, inHeader} {
			sig := tok[strings.LastIndexByte(tok, '.')+1:]
			if strings.Contains(body, sig) {
				t.Errorf("GET %s shows a client's token", p)
			}
		}
	}
}

// sessionsOf lists the open sessions a query selects.
func sessionsOf(t *testing.T, base, query string) admin.SessionPage {
	t.Helper()
	status, body := adminDo(t, http.DefaultClient, "GET", base+"/sessions?"+query, nil)
	var page admin.SessionPage
	if status != 200 || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("GET /sessions?%s: %d %s", query, status, body)
	}
	return page
}

// sortedIDs is ids in the order /sessions lists them.
func sortedIDs(ids ...uint64) []uint64 {
	slices.Sort(ids)
	return ids
}

func ids(page admin.SessionPage) []uint64 {
	out := []uint64{}
	for _, s := range page.Sessions {
		out = append(out, s.ID)
	}
	return out
}

// Sessions through the admin API: filtered by role, topic, kind and client address,
// inspected one at a time, closed one at a time and in bulk. A closed client reads close code
// 4011 with the operator's reason; a producer closed with messages in flight first gets an
// ack for every one of them, as at a drain.
func TestAdminSessions(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	srv, base := edgetest.Start(t, tokens.YAML())
	hs := httptest.NewServer(srv.AdminHandler())
	defer hs.Close()
	uniq := strconv.FormatInt(time.Now().UnixNano(), 36)
	topicA, topicB := "public/default/a-"+uniq, "public/default/b-"+uniq
	dial := func(path, role string) *websocket.Conn {
		return edgetest.Dial(t, base+path+"?token="+tokens.Token(t, role))
	}
	prod := dial("/ws/v2/producer/persistent/"+topicA, "alice")
	cons := dial("/ws/v2/consumer/persistent/"+topicA+"/sub", "bob")
	reader := dial("/ws/v2/reader/persistent/"+topicB, "bob")
	other := dial("/ws/v2/consumer/persistent/"+topicB+"/sub2", "carol")
	edgetest.WaitFor(t, 10*time.Second, "four sessions", func() bool { return sessionsOf(t, hs.URL, "").Total == 4 })

	// A session's ID is given once its handshake is answered, so the four need not be
	// numbered in the order they were dialled: each is found by what it is.
	var pid, cid, rid, oid uint64
	var readerAddr string
	for _, s := range sessionsOf(t, hs.URL, "").Sessions {
		switch {
		case s.Kind == "producer":
			pid = s.ID
		case s.Kind == "reader":
			rid, readerAddr = s.ID, s.RemoteAddr
		case s.Role == "bob":
			cid = s.ID
		default:
			oid = s.ID
		}
	}
	host := strings.Split(readerAddr, ":")[0]
	for query, want := range map[string][]uint64{
		"role=bob":                     sortedIDs(cid, rid),
		"topic=persistent://" + topicA: sortedIDs(pid, cid),
		"kind=reader":                  {rid},
		"kind=consumer&role=carol":     {oid},
		"address=" + host:              sortedIDs(pid, cid, rid, oid),
		"address=" + readerAddr:        {rid},
		"subscription=sub2":            {oid},
		"role=nobody":                  {},
	} {
		if got := ids(sessionsOf(t, hs.URL, query)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("/sessions?%s = %v, want %v", query, got, want)
		}
	}

	// One session.
	status, body := adminDo(t, hs.Client(), "GET", hs.URL+"/sessions/"+strconv.FormatUint(cid, 10), nil)
	var one admin.SessionJSON
	if status != 200 || json.Unmarshal([]byte(body), &one) != nil || one.ID != cid || one.Kind != "consumer" || one.Role != "bob" ||
		one.Subscription != "sub" {
		t.Errorf("GET /sessions/%d: %d %s", cid, status, body)
	}
	for path, want := range map[string]int{"/sessions/999999": 404, "/sessions/x": 400, "/sessions?kind=producers": 400} {
		if status, _ := adminDo(t, hs.Client(), "GET", hs.URL+path, nil); status != want {
			t.Errorf("GET %s: %d, want %d", path, status, want)
		}
	}
	if status, _ := adminDo(t, hs.Client(), "DELETE", hs.URL+"/sessions/1?reason="+strings.Repeat("x", 121), nil); status != 400 {
		t.Errorf("a reason over 120 bytes: %d, want 400", status)
	}

	// The producer has messages in flight: the broker holds their receipts.
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	const n = 20
	acks := readAcks(prod, n)
	writeN(t, prod, n, 100)
	edgetest.WaitFor(t, 10*time.Second, "the producer's messages in flight", func() bool {
		s, ok := srv.Session(pid)
		return ok && s.InFlight == n
	})
	status, body = adminDo(t, hs.Client(), "DELETE", hs.URL+"/sessions/"+strconv.FormatUint(pid, 10)+"?reason=maintenance", nil)
	if status != 200 {
		t.Fatalf("DELETE /sessions/%d: %d %s", pid, status, body)
	}
	faults.ReleaseReceipts()
	if got := countResults(collect(acks, n, 20*time.Second)); got["ok"] != n {
		t.Errorf("the closed producer's acks: %v, want %d ok", got, n)
	}
	expectClose(t, prod, wsapi.CloseByOperator, "maintenance")

	// POST /sessions/{id}/close, the same without a reason.
	if status, body := adminDo(t, hs.Client(), "POST", hs.URL+"/sessions/"+strconv.FormatUint(oid, 10)+"/close", nil); status != 200 {
		t.Fatalf("POST /sessions/%d/close: %d %s", oid, status, body)
	}
	expectClose(t, other, wsapi.CloseByOperator, admin.DefaultCloseReason)

	// Bulk: an empty filter is refused; role=bob closes the consumer and the reader.
	if status, _ := adminDo(t, hs.Client(), "POST", hs.URL+"/sessions/close", nil); status != 400 {
		t.Errorf("a bulk close without a filter: %d, want 400", status)
	}
	status, body = adminDo(t, hs.Client(), "POST", hs.URL+"/sessions/close?role=bob&reason=rotating+credentials", nil)
	var closed admin.Closed
	if status != 200 || json.Unmarshal([]byte(body), &closed) != nil || fmt.Sprint(closed.Closed) != fmt.Sprint(sortedIDs(cid, rid)) {
		t.Fatalf("POST /sessions/close?role=bob: %d %s", status, body)
	}
	expectClose(t, cons, wsapi.CloseByOperator, "rotating credentials")
	expectClose(t, reader, wsapi.CloseByOperator, "rotating credentials")
	edgetest.WaitFor(t, 10*time.Second, "no session left", func() bool { return sessionsOf(t, hs.URL, "").Total == 0 })
}

// expectClose reads c until its close frame, which must carry code and reason.
func expectClose(t *testing.T, c *websocket.Conn, code int, reason string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		ce, ok := errors.AsType[*websocket.CloseError](err)
		if !ok || ce.Code != code || ce.Text != reason {
			t.Errorf("read: %v, want close %d %q", err, code, reason)
		}
		return
	}
}

// Failed TLS handshakes on the admin listener are the client's doing: their log lines are
// rate-limited as the WebSocket listener's are, so that a flood of them costs the log a few
// lines a second.
func TestAdminTLSHandshakeErrorsRateLimited(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	srv, _ := edgetest.Listen(t, fmt.Sprintf("admin_listen: \"127.0.0.1:0\"\nadmin_tls: { cert_file: %s, key_file: %s }\n",
		certFile, keyFile), withJSONLog(logs))
	const attempts = 200
	start := time.Now()
	for range attempts {
		c, err := net.DialTimeout("tcp", srv.AdminAddr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("not a TLS client hello\r\n\r\n"))
		_, _ = io.Copy(io.Discard, c) // until the listener gives up on it
		_ = c.Close()
	}
	elapsed := time.Since(start)
	var lines int
	edgetest.WaitFor(t, 20*time.Second, "a handshake error logged", func() bool {
		lines = strings.Count(logs.String(), "TLS handshake error")
		return lines > 0
	})
	// The limiter lets a burst of 20 through, then 10 a second.
	if limit := 20 + int(10*(elapsed+time.Second).Seconds()); lines > limit || lines >= attempts {
		t.Errorf("%d handshake error lines for %d failed handshakes in %s, want at most %d", lines, attempts, elapsed, limit)
	}
}
