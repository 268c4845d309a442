package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicehq/sluice/core/auth/jwksurl"
)

// The bounds of one fetch of a key set: a provider that is slow or answers with more than a
// key set holds cannot hold a handshake, or the edge's memory, for longer or more.
const (
	JWKSFetchTimeout = 10 * time.Second
	JWKSMaxBytes     = 1 << 20
)

// asymmetricMethods are the algorithms a key-set token may be signed with: a provider's
// published keys are public, so an HMAC token "signed" with one is forged by anyone.
var asymmetricMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// jwks is the key set an OpenID Connect provider publishes at auth.token.jwks_url, fetched
// and kept. github.com/MicahParks/jwkset decodes and validates the keys, and
// github.com/MicahParks/keyfunc picks the one a token's kid names and checks that the
// token's alg is the key's own; fetching is here, so that it is bounded (time, bytes) and
// paced (minGap) the way the edge needs, which jwkset's own HTTP storage is not.
type jwks struct {
	url      string
	client   *http.Client
	interval time.Duration // scheduled refetch
	minGap   time.Duration // the shortest time between two fetches
	store    *jwkset.MemoryJWKSet
	kf       keyfunc.Keyfunc

	mu      sync.Mutex // one fetch at a time; guards last
	last    time.Time  // when the last fetch began
	loaded  atomic.Bool
	lastErr atomic.Pointer[error]       // the last fetch's failure; nil after a success
	log     atomic.Pointer[slog.Logger] // set by run; nil before
}

// newJWKS prepares the key set t names; its errors name the setting at fault.
func newJWKS(t Token) (*jwks, error) {
	if err := jwksurl.Check(t.JWKSURL); err != nil {
		return nil, fmt.Errorf("auth.token.jwks_url: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if t.JWKSCAFile != "" {
		b, err := os.ReadFile(t.JWKSCAFile)
		if err != nil {
			return nil, fmt.Errorf("auth.token.jwks_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("auth.token.jwks_ca_file: %s holds no PEM certificate", t.JWKSCAFile)
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	k := &jwks{
		url:      t.JWKSURL,
		client:   &http.Client{Transport: transport, CheckRedirect: checkRedirect},
		interval: or(t.JWKSRefreshInterval, DefaultJWKSRefreshInterval),
		minGap:   or(t.JWKSRefreshMinInterval, DefaultJWKSRefreshMinInterval),
		store:    jwkset.NewMemoryStorage(),
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: k.store, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return nil, err
	}
	k.kf = kf
	return k, nil
}

// key is the jwt.Keyfunc of a key-set token: the key its kid names, refetching the set once
// (paced by minGap) when the kid is unknown, so that a provider's new key is accepted as soon
// as tokens signed with it arrive.
func (k *jwks) key(ctx context.Context, t *jwt.Token) (any, error) {
	key, err := k.kf.KeyfuncCtx(ctx)(t)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		k.refetch(ctx)
		key, err = k.kf.KeyfuncCtx(ctx)(t)
	}
	switch {
	case errors.Is(err, jwkset.ErrKeyNotFound) && !k.loaded.Load():
		// Why not is in the log and on /readyz, not for clients: it names the provider's
		// address and how it failed.
		return nil, errNoKeys
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return nil, errors.New("no key in auth.token.jwks_url has the token's kid")
	case err != nil:
		return nil, errors.New("the token's alg or kid does not match a key of auth.token.jwks_url")
	}
	return key, nil
}

// errNoKeys refuses tokens while no key has been fetched.
var errNoKeys = errors.New("no keys from auth.token.jwks_url yet")

// unavailable says why no key has been fetched yet, for the operator.
func (k *jwks) unavailable() error {
	if p := k.lastErr.Load(); p != nil {
		return fmt.Errorf("%w: %w", errNoKeys, *p)
	}
	return errNoKeys
}

// refetch fetches the set unless a fetch began less than minGap ago. Callers that arrive
// during a fetch wait for it and then find it recent: a flood of unknown kids costs one fetch
// per minGap, and so does its log line when it fails.
func (k *jwks) refetch(ctx context.Context) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.last) < k.minGap {
		return
	}
	// A fetch serves every handshake waiting on it: the one that began it leaving must not
	// cut it short.
	if err := k.fetchLocked(context.WithoutCancel(ctx)); err != nil {
		if log := k.log.Load(); log != nil {
			log.Warn("refetching the token signing keys for an unknown kid failed; the keys fetched before are kept",
				"setting", "auth.token.jwks_url", "err", err)
		}
	}
}

// fetch fetches the set now, whatever the pacing (at start and on schedule).
func (k *jwks) fetch(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fetchLocked(ctx)
}

// fetchLocked fetches the set and replaces the kept keys with it: a key the provider removed
// stops verifying tokens. A failed fetch keeps the keys there are. Must hold k.mu.
func (k *jwks) fetchLocked(ctx context.Context) error {
	k.last = time.Now()
	keys, err := k.get(ctx)
	if err == nil {
		err = k.store.KeyReplaceAll(ctx, keys)
	}
	if err != nil {
		err = fmt.Errorf("fetching %s: %w", redacted(k.url), err)
		k.lastErr.Store(&err)
		return err
	}
	k.lastErr.Store(nil)
	k.loaded.Store(true)
	return nil
}

// get fetches and decodes the set, bounded by JWKSFetchTimeout and JWKSMaxBytes.
func (k *jwks) get(ctx context.Context) ([]jwkset.JWK, error) {
	ctx, cancel := context.WithTimeout(ctx, JWKSFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return nil, ue.Err // without the URL, which fetchLocked's error names redacted
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, JWKSMaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > JWKSMaxBytes {
		return nil, fmt.Errorf("the key set is larger than %d bytes", JWKSMaxBytes)
	}
	return decodeJWKS(body)
}

// redacted is u without a password or a query (where a provider may take an API key), for
// errors and logs.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the key set's URL"
	}
	if p.RawQuery != "" || p.ForceQuery {
		p.RawQuery, p.ForceQuery = "…", false
	}
	p.Fragment, p.RawFragment = "", ""
	return p.Redacted()
}

// decodeJWKS decodes a key set's public signing keys. Symmetric (oct) keys and keys of
// unsupported types are left out; a malformed key of a supported type fails the whole set,
// so that a provider's mistake is seen rather than half-applied.
func decodeJWKS(body []byte) ([]jwkset.JWK, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	validate := jwkset.JWKValidateOptions{GetX5U: refuseX5U}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for i, m := range set.Keys {
		if m.KTY == jwkset.KtyOct {
			continue
		}
		m.D, m.P, m.Q, m.DP, m.DQ, m.QI, m.OTH = "", "", "", "", "", "", nil // public parts only
		j, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, validate)
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue
		case err != nil:
			return nil, fmt.Errorf("key %d (kid %.64q): %w", i, m.KID, err)
		}
		keys = append(keys, j)
	}
	return keys, nil
}

// checkRedirect follows a provider's redirect only to a URL jwks_url itself could be: never
// from https down to http on the network.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("more than 5 redirects")
	}
	if err := jwksurl.Check(req.URL.String()); err != nil {
		return fmt.Errorf("redirected to %s: %w", req.URL.Redacted(), err)
	}
	return nil
}

// refuseX5U keeps a key set from making the edge fetch other URLs.
func refuseX5U(*url.URL) ([]*x509.Certificate, error) {
	return nil, errors.New("x5u is not followed")
}

// run refetches the set every interval until ctx ends; while no key has been fetched it
// retries every minGap instead. Failures are logged, once per attempt: the attempts are
// paced, so the log is too.
func (k *jwks) run(ctx context.Context, log *slog.Logger) {
	k.log.Store(log)
	t := time.NewTimer(k.next())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := k.fetch(ctx); err != nil && ctx.Err() == nil {
			log.Error("refreshing the token signing keys failed; the keys fetched before are kept",
				"setting", "auth.token.jwks_url", "err", err)
		}
		t.Reset(k.next())
	}
}

// next is when run fetches next.
func (k *jwks) next() time.Duration {
	if !k.loaded.Load() {
		return k.minGap
	}
	return k.interval
}
