package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/config"
)

const sessionsUsage = `usage: sluice sessions list  [FILTER] [--json]      list the open sessions
       sluice sessions show  ID [--json]          show one session
       sluice sessions close ID... [--reason R]   close sessions (the client sees 4011 and R)
       sluice sessions close FILTER [--reason R]  close every session FILTER selects
       sluice sessions close --all [--reason R]   close every session
FILTER is any of --route, --kind, --topic, --role, --subscription, --address.
The admin API is at --admin (default http://` + config.DefaultAdminListen + `); with admin_auth,
give a super-user's token (--token-file) or client certificate (--cert-file, --key-file).`

// adminClient calls a running edge's admin API.
type adminClient struct {
	base   string
	token  string
	client *http.Client
}

// sessionsFlags are the flags every sessions verb takes.
type sessionsFlags struct {
	admin, token, tokenFile, caFile, certFile, keyFile string
	json, all                                          bool
	reason                                             string
	filter                                             admin.SessionFilter
}

func (f *sessionsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.admin, "admin", "http://"+config.DefaultAdminListen, "the admin API's base URL (http:// or https://, with any path prefix)")
	fs.StringVar(&f.token, "token", "", "a super-user's token (other users of the machine can read a command line: prefer --token-file)")
	fs.StringVar(&f.tokenFile, "token-file", "", "a file holding a super-user's token")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM CAs to verify an https admin listener with (default: the system's)")
	fs.StringVar(&f.certFile, "cert-file", "", "PEM client certificate, for an admin listener that verifies client certificates")
	fs.StringVar(&f.keyFile, "key-file", "", "PEM private key of --cert-file")
	fs.BoolVar(&f.json, "json", false, "print JSON as the admin API answers it")
	fs.StringVar(&f.reason, "reason", "", "close: the reason the clients see (at most 120 bytes; default \""+admin.DefaultCloseReason+"\")")
	fs.BoolVar(&f.all, "all", false, "close: every open session")
	fs.StringVar(&f.filter.Route, "route", "", "only sessions on this route")
	fs.StringVar(&f.filter.Kind, "kind", "", "only producer, consumer or reader sessions")
	fs.StringVar(&f.filter.Topic, "topic", "", "only sessions on this topic (persistent://tenant/ns/topic)")
	fs.StringVar(&f.filter.Role, "role", "", "only sessions of this role")
	fs.StringVar(&f.filter.Subscription, "subscription", "", "only sessions of this subscription")
	fs.StringVar(&f.filter.Address, "address", "", "only sessions from this client address (host, or host:port)")
}

func runSessions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	if verb != "list" && verb != "show" && verb != "close" {
		fmt.Fprintln(stderr, sessionsUsage)
		return fmt.Errorf("sessions: unknown verb %q: want list, show or close", verb)
	}
	fs := flag.NewFlagSet("sessions "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, sessionsUsage)
		fs.PrintDefaults()
	}
	var f sessionsFlags
	f.register(fs)
	ids, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		return c.list(ctx, f, stdout)
	case "show":
		if len(ids) != 1 {
			return errors.New("sessions show: want one session id")
		}
		return c.show(ctx, ids[0], f.json, stdout)
	}
	return c.close(ctx, ids, f, stdout)
}

// parseInterleaved parses fs's flags wherever they are among args, and returns the other
// arguments in order: `close 12 13 --reason x` reads as well as `close --reason x 12 13`.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		rest, args = append(rest, args[0]), args[1:]
	}
}

// client builds the admin API client the flags describe.
func (f sessionsFlags) client() (*adminClient, error) {
	u, err := url.Parse(f.admin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--admin %q: want http://host:port or https://host:port, with any path prefix", f.admin)
	}
	token := f.token
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", f.caFile)
		}
	}
	if f.certFile != "" || f.keyFile != "" {
		cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file and --key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return &adminClient{
		base:   strings.TrimSuffix(u.String(), "/"),
		token:  token,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}},
	}, nil
}

// do calls the admin API and decodes its JSON answer into out; an error status is returned
// as an error with the API's reason.
func (c *adminClient) do(ctx context.Context, method, path string, q url.Values, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil) //nolint:gosec // G704: the URL is the operator's --admin flag
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req) //nolint:gosec // G704: the URL is the operator's --admin flag
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin API: reading %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Reason string }
		if json.Unmarshal(body, &e) != nil || e.Reason == "" {
			e.Reason = strings.TrimSpace(string(body))
		}
		return fmt.Errorf("admin API: %s %s: %s: %s", method, path, resp.Status, e.Reason)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("admin API: %s %s: not the admin API's JSON (is --admin the admin listener?): %w", method, path, err)
	}
	return nil
}

func filterQuery(f admin.SessionFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"route": f.Route, "kind": f.Kind, "topic": f.Topic, "role": f.Role,
		"subscription": f.Subscription, "address": f.Address} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// listAll fetches every session the filter selects, a page at a time.
func (c *adminClient) listAll(ctx context.Context, f admin.SessionFilter) ([]admin.SessionJSON, error) {
	var all []admin.SessionJSON
	q := filterQuery(f)
	q.Set("limit", "1000")
	for {
		q.Set("offset", strconv.Itoa(len(all)))
		var page admin.SessionPage
		if err := c.do(ctx, http.MethodGet, "/sessions", q, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Sessions...)
		if len(page.Sessions) == 0 || len(all) >= page.Total {
			return all, nil
		}
	}
}

func (c *adminClient) list(ctx context.Context, f sessionsFlags, w io.Writer) error {
	all, err := c.listAll(ctx, f.filter)
	if err != nil {
		return err
	}
	if f.json {
		return writeIndented(w, all)
	}
	printSessions(w, all)
	return nil
}

func (c *adminClient) show(ctx context.Context, id string, asJSON bool, w io.Writer) error {
	var s admin.SessionJSON
	if err := c.do(ctx, http.MethodGet, "/sessions/"+url.PathEscape(id), nil, &s); err != nil {
		return err
	}
	if asJSON {
		return writeIndented(w, s)
	}
	printSessions(w, []admin.SessionJSON{s})
	return nil
}

// close closes the sessions ids names, or those the filter selects (all with --all).
func (c *adminClient) close(ctx context.Context, ids []string, f sessionsFlags, w io.Writer) error {
	q := url.Values{}
	if f.reason != "" {
		q.Set("reason", f.reason)
	}
	hasFilter := f.filter != admin.SessionFilter{}
	var closed admin.Closed
	switch {
	case len(ids) > 0 && (hasFilter || f.all):
		return errors.New("sessions close: give session ids or a filter (or --all), not both")
	case len(ids) > 0:
		for _, id := range ids {
			var one admin.Closed
			if err := c.do(ctx, http.MethodDelete, "/sessions/"+url.PathEscape(id), q, &one); err != nil {
				return err
			}
			closed.Closed, closed.Reason = append(closed.Closed, one.Closed...), one.Reason
		}
	case hasFilter || f.all:
		for k, v := range filterQuery(f.filter) {
			q[k] = v
		}
		if f.all {
			q.Set("all", "true")
		}
		if err := c.do(ctx, http.MethodPost, "/sessions/close", q, &closed); err != nil {
			return err
		}
	default:
		return errors.New("sessions close: give session ids, a filter (--role, --topic, …) or --all")
	}
	if f.json {
		return writeIndented(w, closed)
	}
	fmt.Fprintf(w, "closed %d sessions (%q): %v\n", len(closed.Closed), closed.Reason, closed.Closed)
	return nil
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printSessions writes sessions as a table.
func printSessions(w io.Writer, sessions []admin.SessionJSON) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tTOPIC\tSUBSCRIPTION\tROLE\tROUTE\tADDRESS\tAGE\tIN\tOUT\tIN FLIGHT\tPAUSED")
	for _, s := range sessions {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.ID, s.Kind, s.Topic, dash(s.Subscription), dash(s.Role),
			s.Route, s.RemoteAddr, seconds(s.AgeSeconds), s.MessagesIn, s.MessagesOut, s.InFlight, paused(s))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d sessions\n", len(sessions))
}

// seconds is a duration in seconds as a table shows it, to the second.
func seconds(s float64) string { return (time.Duration(s) * time.Second).String() }

// paused is what a paused session waits for and for how long, or a dash.
func paused(s admin.SessionJSON) string {
	if s.PausedOn == "" {
		return "-"
	}
	return s.PausedOn + " " + seconds(s.PausedSeconds)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
