// Package jwksurl checks the URL an OpenID Connect provider's key set is fetched from. It is
// a leaf, so that the configuration validates auth.token.jwks_url with the same check the
// authenticator applies to the URL and to every redirect it follows.
package jwksurl

import (
	"errors"
	"net"
	"net/url"
)

// Check checks that u can be fetched without trusting the network: an https URL, or an http
// one to a loopback address (a provider's sidecar, a test).
func Check(u string) error {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return errors.New("must be an absolute https URL")
	}
	switch p.Scheme {
	case "https":
		return nil
	case "http":
		h := p.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return errors.New("http is allowed only to a loopback address: use https")
	}
	return errors.New("must be an https URL")
}
