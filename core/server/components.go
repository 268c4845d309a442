package server

import (
	"fmt"

	"github.com/sluicehq/sluice/core/auth"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/certs"
	"github.com/sluicehq/sluice/core/frontdoor/clientaddr"
	"github.com/sluicehq/sluice/core/frontdoor/connlimit"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
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

// policySettings are the grants' edge-wide settings, from the websocket and limits sections.
func policySettings(cfg *config.Config) policy.Settings {
	ws, l := cfg.WebSocket, cfg.Limits
	return policy.Settings{
		Conn: session.ConnConfig{
			ReadLimit:    ws.MaxTextMessageSize.Bytes(),
			WriteTimeout: ws.WriteTimeout,
			PingInterval: ws.PingInterval,
			IdleTimeout:  ws.IdleTimeout,
			PongTimeout:  ws.PongTimeout,
			Compression:  ws.Compression,
		},
		Frames: wsapi.FrameLimits{
			MaxPayloadBytes:  int(ws.MaxMessageSize.Bytes()),
			MaxContextBytes:  int(ws.MaxContextSize.Bytes()),
			MaxProperties:    ws.MaxProperties,
			MaxPropertyBytes: int(ws.MaxPropertiesSize.Bytes()),
		},
		MessageRate:           l.MessageRate,
		MessageBurst:          l.MessageBurst,
		MessageRatePerAddress: l.MessageRatePerAddress,
		PerTenant:             policyQuotas(l.PerTenant),
		PerRole:               policyQuotas(l.PerRole),
	}
}

// policyQuotas are the quotas of a limits.per_tenant or limits.per_role section.
func policyQuotas(q config.Quotas) policy.Quotas {
	out := policy.Quotas{Default: policyQuota(q.Default())}
	if len(q.Overrides) > 0 {
		out.Overrides = make(map[string]policy.Quota, len(q.Overrides))
		for name, o := range q.Overrides {
			out.Overrides[name] = policyQuota(o)
		}
	}
	return out
}

func policyQuota(q config.Quota) policy.Quota {
	return policy.Quota{MaxConnections: q.MaxConnections, MessageRate: q.MessageRate, ByteRate: q.ByteRate.Bytes()}
}
