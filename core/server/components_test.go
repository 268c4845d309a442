package server

import (
	"crypto/tls"
	"net/netip"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/core/auth"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/certs"
	"github.com/sluicehq/sluice/core/frontdoor/clientaddr"
)

// The file's defaults and the authenticator's zero values mean the same claims and intervals.
func TestAuthDefaultsAgree(t *testing.T) {
	t.Parallel()
	got := authOptions(config.Defaults().Auth).Token
	want := auth.Token{
		AuthClaim:              auth.DefaultAuthClaim,
		AudienceClaim:          auth.DefaultAudienceClaim,
		JWKSRefreshInterval:    auth.DefaultJWKSRefreshInterval,
		JWKSRefreshMinInterval: auth.DefaultJWKSRefreshMinInterval,
		CloseOnExpiry:          got.CloseOnExpiry,
	}
	if got != want {
		t.Fatalf("defaults: got %+v, want %+v", got, want)
	}
}

// Every field of the auth section reaches the authenticator: a key added to config.TokenAuth
// and not to auth.Token fails here.
func TestAuthOptionsCarryEveryKey(t *testing.T) {
	t.Parallel()
	cfgT, optT := reflect.TypeFor[config.TokenAuth](), reflect.TypeFor[auth.Token]()
	for f := range cfgT.Fields() {
		if _, ok := optT.FieldByName(f.Name); !ok {
			t.Errorf("auth.token.%s (config.TokenAuth.%s) is not in auth.Token", f.Tag.Get("koanf"), f.Name)
		}
	}
}

// Every trusted_proxies.header value maps to its header; zero is X-Forwarded-For.
func TestProxyOptions(t *testing.T) {
	t.Parallel()
	for h, want := range map[config.ForwardedHeader]clientaddr.Header{
		"": clientaddr.XForwardedFor, config.ForwardedXFF: clientaddr.XForwardedFor,
		config.ForwardedRFC: clientaddr.Forwarded, config.ForwardedRealIP: clientaddr.XRealIP, config.ForwardedNone: clientaddr.NoHeader,
	} {
		got, err := proxyOptions(config.TrustedProxies{Header: h, Networks: []string{"10.0.0.0/8", "192.0.2.7"}})
		if err != nil {
			t.Fatal(err)
		}
		nets := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
		if got.Header != want || !reflect.DeepEqual(got.Networks, nets) {
			t.Errorf("%q: got %+v", h, got)
		}
	}
	if _, err := proxyOptions(config.TrustedProxies{Networks: []string{"nope"}}); err == nil || err.Error() != `trusted_proxies.networks[0]: "nope" is not an address or a CIDR network` {
		t.Errorf("bad network: %v", err)
	}
}

// A listener's TLS section becomes its files, the version constant and the client-cert rule.
func TestTLSFiles(t *testing.T) {
	t.Parallel()
	got := tlsFiles(config.TLS{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", MinVersion: "1.3", ClientAuth: config.ClientAuthRequire})
	want := certs.Files{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", RequireClientCert: true, MinVersion: tls.VersionTLS13}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := tlsFiles(config.TLS{CertFile: "c"}); got.MinVersion != tls.VersionTLS12 || got.RequireClientCert {
		t.Fatalf("zero: got %+v", got)
	}
}
