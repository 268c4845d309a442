package server

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"

	"github.com/sluicehq/sluice/core/auth"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/certs"
)

// ErrPluginMissing is wrapped by preflight's error for a plugin executable that does not
// exist: usually one that was never built.
var ErrPluginMissing = errors.New("plugin executable not found")

// preflight resolves what Start reads from the world before it listens: the listen
// addresses, the client-authentication key, the broker's token and CA files, the listeners'
// certificates and keys, and the plugin executables. Start and Validate both run it, so that `sluice validate` accepts exactly the
// files `sluice serve` starts with. Every problem is reported, each naming its key.
func preflight(cfg *config.Config) error {
	var errs []error
	addrs := []struct{ key, addr string }{
		{"listen", cfg.Listen},
		{"admin_listen", cfg.AdminListen},
		{"broker.embedded.listen", cfg.Broker.Embedded.Listen},
		{"broker.embedded.admin_listen", cfg.Broker.Embedded.AdminListen},
	}
	for _, a := range addrs {
		if a.addr == "" || a.addr == config.AdminListenOff || (strings.HasPrefix(a.key, "broker.embedded") && cfg.Broker.URL != "") {
			continue
		}
		if _, err := net.ResolveTCPAddr("tcp", a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.key, err))
		}
	}
	if cfg.Broker.URL == "" {
		// What embedded.New checks at start; the addresses were checked above.
		ec := embeddedConfig(cfg.Broker.Embedded)
		ec.Addr, ec.AdminAddr = "", ""
		if err := ec.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("broker.embedded: %w", err))
		}
	}
	if _, err := auth.New(authOptions(cfg.Auth)); err != nil {
		errs = append(errs, err)
	}
	if f := cfg.Broker.AuthTokenFile; f != "" {
		if b, err := os.ReadFile(f); err != nil {
			errs = append(errs, fmt.Errorf("broker.auth_token_file: %w", err))
		} else if strings.TrimSpace(string(b)) == "" {
			errs = append(errs, fmt.Errorf("broker.auth_token_file: %s is empty", f))
		}
	}
	if f := cfg.Broker.TLSTrustCertsFile; f != "" {
		if b, err := os.ReadFile(f); err != nil {
			errs = append(errs, fmt.Errorf("broker.tls_trust_certs_file: %w", err))
		} else if !x509.NewCertPool().AppendCertsFromPEM(b) {
			errs = append(errs, fmt.Errorf("broker.tls_trust_certs_file: %s holds no PEM certificate", f))
		}
	}
	for _, t := range []struct {
		key string
		cfg config.TLS
	}{{"tls", cfg.TLS}, {"admin_tls", cfg.AdminTLS}} {
		if t.cfg.Enabled() {
			if err := certs.Check(tlsFiles(t.cfg), t.key); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := checkPlugins(cfg); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkPlugins reports every plugin executable that cannot be run.
func checkPlugins(cfg *config.Config) error {
	var errs []error
	for _, p := range cfg.Plugins {
		if err := checkExecutable(p.Path); err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// checkExecutable reports why path cannot be run as a plugin.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s (build it first; the repository's example plugins: make examples)", ErrPluginMissing, path)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}
