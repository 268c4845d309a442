// Package certs serves a listener's TLS certificate from files that may be replaced while
// the edge runs: on a handshake, at most once per CheckInterval, the certificate, key and
// client-CA files are stat'ed, and when one changed (modification time, size or the file
// itself, as a rename or a Kubernetes secret's symlink swap replaces it) they are read again.
// A set that does not load (a key that does not match its certificate, as seen halfway
// through a rotation) keeps the previous certificate in service and is logged.
package certs

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CheckInterval is the most often the files are stat'ed for a change.
const CheckInterval = time.Second

// Files are a listener's certificate files and what a handshake asks of a client.
type Files struct {
	// CertFile is the PEM certificate chain the listener presents.
	CertFile string
	// KeyFile is the PEM private key of CertFile.
	KeyFile string
	// ClientCAFile is a PEM file of the CAs client certificates are verified against. Zero
	// means clients are not asked for a certificate.
	ClientCAFile string
	// RequireClientCert refuses a client that presents no certificate; false verifies one
	// only if given. It applies only with ClientCAFile.
	RequireClientCert bool
	// MinVersion is the oldest TLS version accepted, a tls.Version* constant. Zero means
	// TLS 1.2.
	MinVersion uint16
}

// Reloader holds a listener's current TLS configuration.
type Reloader struct {
	cfg Files
	key string // the configuration key, for logs and errors ("tls", "admin_tls")
	log *slog.Logger

	mu      sync.Mutex // held while checking the files
	checked time.Time
	stamps  []os.FileInfo
	conf    atomic.Pointer[tls.Config]
	failed  atomic.Bool // the last change did not load; logged once
}

// New loads the files cfg names; key names the configuration section in errors and logs.
// Its errors never contain key material.
func New(cfg Files, key string, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{cfg: cfg, key: key, log: log}
	conf, stamps, err := r.load()
	if err != nil {
		return nil, err
	}
	r.conf.Store(conf)
	r.stamps, r.checked = stamps, time.Now()
	return r, nil
}

// Check loads the files cfg names as New would, and reports what is wrong with them.
func Check(cfg Files, key string) error {
	_, err := New(cfg, key, nil)
	return err
}

// Config is the tls.Config for the listener: each handshake gets the current certificate.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: r.conf.Load().MinVersion,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			r.maybeReload()
			return r.conf.Load(), nil
		},
	}
}

// Certificate is the leaf certificate in service, for logs and tests.
func (r *Reloader) Certificate() *x509.Certificate { return r.conf.Load().Certificates[0].Leaf }

func (r *Reloader) files() []string {
	f := []string{r.cfg.CertFile, r.cfg.KeyFile}
	if r.cfg.ClientCAFile != "" {
		f = append(f, r.cfg.ClientCAFile)
	}
	return f
}

// maybeReload reloads the files if one changed since the last check, at most once per
// CheckInterval; a handshake never waits for another's check.
func (r *Reloader) maybeReload() {
	if !r.mu.TryLock() {
		return
	}
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.checked) < CheckInterval {
		return
	}
	r.checked = now
	changed := false
	for i, f := range r.files() {
		fi, err := os.Stat(f)
		if err != nil || !same(r.stamps[i], fi) {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	conf, stamps, err := r.load()
	if err != nil {
		if r.failed.CompareAndSwap(false, true) {
			r.log.Warn("TLS files changed but do not load; serving the previous certificate", "key", r.key, "err", err)
		}
		return
	}
	r.failed.Store(false)
	r.conf.Store(conf)
	r.stamps = stamps
	leaf := conf.Certificates[0].Leaf
	r.log.Info("TLS certificate reloaded", "key", r.key, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
}

func same(a, b os.FileInfo) bool {
	return a != nil && b != nil && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size() && os.SameFile(a, b)
}

// load reads the files and builds the configuration a handshake uses.
func (r *Reloader) load() (*tls.Config, []os.FileInfo, error) {
	var stamps []os.FileInfo
	for _, f := range r.files() {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", r.key, err)
		}
		stamps = append(stamps, fi)
	}
	cert, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		// LoadX509KeyPair's errors name the files and the problem, not their contents.
		return nil, nil, fmt.Errorf("%s.cert_file and key_file: %w", r.key, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("%s.cert_file: %w", r.key, err)
		}
	}
	conf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   cmp.Or(r.cfg.MinVersion, tls.VersionTLS12),
		NextProtos:   []string{"http/1.1"},
	}
	if f := r.cfg.ClientCAFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("%s.client_ca_file: %w", r.key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, nil, fmt.Errorf("%s.client_ca_file: %s holds no PEM certificate", r.key, f)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.VerifyClientCertIfGiven
		if r.cfg.RequireClientCert {
			conf.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return conf, stamps, nil
}

// Version is the tls.Version* constant of a min_version value; zero means TLS 1.2.
func Version(v string) uint16 {
	switch v {
	case "1.0":
		return tls.VersionTLS10
	case "1.1":
		return tls.VersionTLS11
	case "1.3":
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}
