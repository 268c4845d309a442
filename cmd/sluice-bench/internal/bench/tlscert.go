package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// benchTLS is a certificate made for one run: its files for sluice serve's tls section, and
// the client's configuration that trusts it.
type benchTLS struct {
	files  tlsFiles
	client *tls.Config
}

// newBenchTLS writes a self-signed ECDSA P-256 certificate for 127.0.0.1, valid for a day,
// and its key into dir.
func newBenchTLS(dir string) (*benchTLS, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sluice-bench"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	t := &benchTLS{files: tlsFiles{CertFile: filepath.Join(dir, "bench.crt"), KeyFile: filepath.Join(dir, "bench.key")}}
	if err := os.WriteFile(t.files.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("writing the certificate: %w", err)
	}
	if err := os.WriteFile(t.files.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, fmt.Errorf("writing the key: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	t.client = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
	return t, nil
}

// serveFiles is sluice serve's tls section for t: nil without a certificate, a plain run.
func (t *benchTLS) serveFiles() *tlsFiles {
	if t == nil {
		return nil
	}
	return &t.files
}

// clientConfig is the load's TLS configuration for t: nil without a certificate.
func (t *benchTLS) clientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.client
}
