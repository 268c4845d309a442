package server

import (
	"fmt"

	"github.com/sluicehq/sluice/core/auth"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/certs"
	"github.com/sluicehq/sluice/core/frontdoor/clientaddr"
	"github.com/sluicehq/sluice/core/frontdoor/connlimit"
)

// The components take their own options, never core/config's structs; these functions
// translate the configuration file's sections into them, in one place. The configuration
// is validated and has its defaults applied before it gets here.

// authOptions are the authenticator's options from the auth section.
func authOptions(a config.Auth) auth.Options {
	t := a.Token
	return auth.Options{
		Token: auth.Token{
			SecretKey:              t.SecretKey,
			SecretKeyFile:          t.SecretKeyFile,
			PublicKey:              t.PublicKey,
			PublicKeyFile:          t.PublicKeyFile,
			JWKSURL:                t.JWKSURL,
			JWKSCAFile:             t.JWKSCAFile,
			JWKSRefreshInterval:    t.JWKSRefreshInterval,
			JWKSRefreshMinInterval: t.JWKSRefreshMinInterval,
			AuthClaim:              t.AuthClaim,
			AudienceClaim:          t.AudienceClaim,
			Audience:               t.Audience,
			Issuer:                 t.Issuer,
			CloseOnExpiry:          t.CloseOnExpiry,
		},
		ClientCertificates: a.ClientCertificates,
		AnonymousRole:      a.AnonymousRole,
	}
}

// tlsFiles are a listener's certificate files from its tls or admin_tls section.
func tlsFiles(t config.TLS) certs.Files {
	return certs.Files{
		CertFile:          t.CertFile,
		KeyFile:           t.KeyFile,
		ClientCAFile:      t.ClientCAFile,
		RequireClientCert: t.ClientAuth == config.ClientAuthRequire,
		MinVersion:        certs.Version(t.MinVersion),
	}
}

// proxyOptions are the client address resolver's options from the trusted_proxies section.
// Its error names the network that does not parse.
func proxyOptions(p config.TrustedProxies) (clientaddr.Options, error) {
	opts := clientaddr.Options{Header: forwardedHeaders[p.Header]}
	for i, n := range p.Networks {
		prefix, err := config.ParseNetwork(n)
		if err != nil {
			return clientaddr.Options{}, fmt.Errorf("trusted_proxies.networks[%d]: %w", i, err)
		}
		opts.Networks = append(opts.Networks, prefix)
	}
	return opts, nil
}

// forwardedHeaders maps trusted_proxies.header to the resolver's headers; the zero value
// (absent, or "") is X-Forwarded-For.
var forwardedHeaders = map[config.ForwardedHeader]clientaddr.Header{
	config.ForwardedXFF:    clientaddr.XForwardedFor,
	config.ForwardedRFC:    clientaddr.Forwarded,
	config.ForwardedRealIP: clientaddr.XRealIP,
	config.ForwardedNone:   clientaddr.NoHeader,
}

// connLimits are the connection limiter's options from the limits section.
func connLimits(l config.Limits) connlimit.Options {
	return connlimit.Options{
		MaxConnections:           l.MaxConnections,
		MaxConnectionsPerAddress: l.MaxConnectionsPerAddress,
		MaxConnectionsPerRole:    l.MaxConnectionsPerRole,
		HandshakeRate:            l.HandshakeRate,
		HandshakeBurst:           l.HandshakeBurst,
	}
}
