package labsim

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// File names of the ingress certificate in Options.StateDir.
const (
	// CAFileName holds the ingress certificate (PEM). It is self-signed and marked as a CA,
	// so a client uses this one file as its root (OIKOS_CHECK_CA_FILE, curl --cacert).
	CAFileName = "http-ca.pem"
	// CAKeyFileName holds the certificate's private key (PEM, mode 0600).
	CAKeyFileName = "http-ca-key.pem"
)

// ingressDNSNames and ingressIPs are the names the ingress certificate covers: every route
// of the seeded lab is under lab.example or directly under example (s3.example).
var (
	ingressDNSNames = []string{"*.lab.example", "lab.example", "*.example"}
	ingressIPs      = []net.IP{net.ParseIP("127.0.20.1")}
)

// certRenewBefore is how close to its expiry a persisted certificate is replaced.
const certRenewBefore = 30 * 24 * time.Hour

// ingressCert is the HTTPS ingress certificate with its PEM form.
type ingressCert struct {
	tls     tls.Certificate
	certPEM []byte
	path    string
}

// loadOrCreateIngressCert reads the ingress certificate and key from dir, creating them on
// first use (or when the stored pair is unusable, expiring or covers other names) so that a
// restart serves the same certificate and a client's trusted CA file stays valid.
func loadOrCreateIngressCert(dir string, now time.Time) (*ingressCert, bool, error) {
	certPath := filepath.Join(dir, CAFileName)
	keyPath := filepath.Join(dir, CAKeyFileName)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		if c, err := parseIngressCert(certPEM, keyPEM, now); err == nil {
			c.path = certPath
			return c, false, nil
		}
	} else {
		for _, err := range []error{cerr, kerr} {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, false, fmt.Errorf("labsim: read ingress certificate: %w", err)
			}
		}
	}
	certPEM, keyPEM, err := newIngressCert(now)
	if err != nil {
		return nil, false, err
	}
	// The key first: a crash between the two writes leaves a certificate that does not
	// match, which the next start replaces.
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, false, fmt.Errorf("labsim: write ingress key: %w", err)
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, false, fmt.Errorf("labsim: write ingress certificate: %w", err)
	}
	c, err := parseIngressCert(certPEM, keyPEM, now)
	if err != nil {
		return nil, false, err
	}
	c.path = certPath
	return c, true, nil
}

// parseIngressCert accepts a stored pair only if it is still what newIngressCert would make:
// matching key, not about to expire, covering every ingress name.
func parseIngressCert(certPEM, keyPEM []byte, now time.Time) (*ingressCert, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("labsim: ingress certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("labsim: ingress certificate: %w", err)
	}
	if now.Add(certRenewBefore).After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return nil, errors.New("labsim: ingress certificate outside its validity")
	}
	for _, n := range ingressDNSNames {
		if !slices.Contains(leaf.DNSNames, n) {
			return nil, fmt.Errorf("labsim: ingress certificate does not cover %s", n)
		}
	}
	for _, ip := range ingressIPs {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return nil, fmt.Errorf("labsim: ingress certificate does not cover %s", ip)
		}
	}
	if !leaf.IsCA {
		return nil, errors.New("labsim: ingress certificate is not a CA")
	}
	pair.Leaf = leaf
	return &ingressCert{tls: pair, certPEM: bytes.Clone(certPEM)}, nil
}

// newIngressCert makes a self-signed ECDSA certificate for the ingress names. It is a CA
// (and its own issuer) so the certificate itself is the root a client trusts.
func newIngressCert(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("labsim: ingress key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("labsim: ingress certificate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "labsim ingress", Organization: []string{"oikos lab simulator"}},
		DNSNames:              slices.Clone(ingressDNSNames),
		IPAddresses:           slices.Clone(ingressIPs),
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("labsim: ingress certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("labsim: ingress key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// writeFileAtomic writes through a temporary file and a rename, so a reader never sees a
// half-written certificate.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
