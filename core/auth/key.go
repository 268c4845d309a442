package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// MinSecretBytes is the shortest HMAC secret accepted: 256 bits, as Pulsar (jjwt's
// Keys.hmacShaKeyFor) requires.
const MinSecretBytes = 32

// Key reading never puts key material in an error: messages name the setting and say what
// is wrong, nothing more.

// readKeyValue reads a key given in Pulsar's forms: "file:" URLs name a file, "data:" URLs
// carry the key, and anything else is the key's base64.
func readKeyValue(v string) ([]byte, error) {
	switch {
	case strings.HasPrefix(v, "file:"):
		path, err := filePath(v)
		if err != nil {
			return nil, err
		}
		return readKeyFile(path)
	case strings.HasPrefix(v, "data:"):
		return dataURL(v)
	}
	b, err := decodeBase64(v)
	if err != nil {
		return nil, errors.New(`not base64: want "file:///path", "data:;base64,<base64>" or the key's base64`)
	}
	return b, nil
}

// filePath returns the path of a file URL: "file:///abs/key", "file://localhost/abs/key", or
// "file:rel/key" (Load resolves a relative one against the configuration file's directory).
func filePath(v string) (string, error) {
	rest := strings.TrimPrefix(v, "file:")
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		host, path, _ := strings.Cut(after, "/")
		if host != "" && host != "localhost" {
			return "", fmt.Errorf("file URL names host %q: want file:///path", host)
		}
		rest = "/" + path
	}
	p, err := url.PathUnescape(rest)
	if err != nil || p == "" || p == "/" {
		return "", errors.New("file URL names no file: want file:///path")
	}
	return p, nil
}

// dataURL decodes an RFC 2397 data URL: "data:;base64,<base64>" or "data:,<percent-encoded>".
func dataURL(v string) ([]byte, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(v, "data:"), ",")
	if !ok {
		return nil, errors.New(`data URL has no ",": want data:;base64,<base64>`)
	}
	if strings.HasSuffix(meta, ";base64") {
		b, err := decodeBase64(data)
		if err != nil {
			return nil, errors.New("data URL: invalid base64")
		}
		return b, nil
	}
	s, err := url.PathUnescape(data)
	if err != nil {
		return nil, errors.New("data URL: invalid percent-encoding")
	}
	return []byte(s), nil
}

// decodeBase64 accepts standard and URL-safe base64, padded or not, ignoring surrounding
// white space.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty")
	}
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// readKeyFile reads a key file. The error names the file, never its contents.
func readKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	return b, nil
}

// secretKey checks an HMAC secret: long enough, and not a public key given by mistake
// (which would let anyone holding the public key sign tokens).
func secretKey(b []byte) ([]byte, error) {
	if _, err := publicKey(b); err == nil {
		return nil, errors.New("this is a public key: give it as public_key or public_key_file")
	}
	if len(b) < MinSecretBytes {
		return nil, fmt.Errorf("the secret is %d bytes: HMAC tokens need at least %d", len(b), MinSecretBytes)
	}
	return b, nil
}

// publicKey parses an RSA or EC public key: DER (X.509 SubjectPublicKeyInfo, as Pulsar's
// tokens create-key-pair writes it, or PKCS #1 for RSA) or PEM (PUBLIC KEY, RSA PUBLIC KEY,
// or a CERTIFICATE whose key is used).
func publicKey(b []byte) (any, error) {
	der := b
	if i := bytes.Index(b, []byte("-----BEGIN")); i >= 0 {
		block, _ := pem.Decode(b[i:])
		if block == nil {
			return nil, errors.New("malformed PEM")
		}
		switch block.Type {
		case "PUBLIC KEY", "RSA PUBLIC KEY":
			der = block.Bytes
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, errors.New("malformed PEM certificate")
			}
			return checkPublic(cert.PublicKey)
		default:
			if strings.Contains(block.Type, "PRIVATE KEY") {
				return nil, fmt.Errorf("this is a private key (PEM %s): give the public key", block.Type)
			}
			return nil, fmt.Errorf("PEM %s: want PUBLIC KEY", block.Type)
		}
	}
	if k, err := x509.ParsePKIXPublicKey(der); err == nil {
		return checkPublic(k)
	}
	if k, err := x509.ParsePKCS1PublicKey(der); err == nil {
		return k, nil
	}
	if _, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return nil, errors.New("this is a private key (DER PKCS #8): give the public key")
	}
	if _, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return nil, errors.New("this is a private key (DER PKCS #1): give the public key")
	}
	return nil, errors.New("not an RSA or EC public key in DER or PEM")
}

// checkPublic keeps the key types tokens can be verified with.
func checkPublic(k any) (any, error) {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return k, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return k, nil
		}
		return nil, errors.New("EC key on an unsupported curve: want P-256, P-384 or P-521")
	}
	return nil, fmt.Errorf("a %T: want an RSA or EC public key", k)
}

// methodsFor returns the signing methods a key verifies: an RSA key RS* and PS*, an EC key
// the ES method of its curve, an HMAC secret HS*. A token signed any other way (alg none,
// or HMAC with the public key as its secret) is refused.
func methodsFor(key any) []string {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P384():
			return []string{"ES384"}
		case elliptic.P521():
			return []string{"ES512"}
		}
		return []string{"ES256"}
	}
	return []string{"HS256", "HS384", "HS512"}
}
