// Package testpki makes throwaway certificate authorities and certificates,
// written as PEM files, for tests of TLS connections on loopback. Keys are
// ECDSA P-256; every certificate is valid from an hour ago for a day, except
// the expired ones of IssueExpired.
package testpki // import "github.com/flowtel/flowtel/internal/testpki"

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// serial numbers the certificates of a test binary.
var serial atomic.Int64

// CA is a certificate authority whose certificate is a PEM file.
type CA struct {
	// CertFile is the path of the CA certificate.
	CertFile string

	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA creates a CA and writes its certificate to dir/<name>.crt.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{dir: dir, cert: cert, key: key}
	ca.CertFile = writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der)
	return ca
}

// Issue signs a certificate for 127.0.0.1 with the extended key usage given
// (x509.ExtKeyUsageServerAuth or ClientAuth) and writes it and its key to
// <name>.crt and <name>.key beside the CA's certificate.
func (ca *CA) Issue(t testing.TB, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, template(name), usage)
}

// IssueExpired is Issue for a certificate whose validity ended an hour ago.
func (ca *CA) IssueExpired(t testing.TB, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	tmpl := template(name)
	tmpl.NotBefore, tmpl.NotAfter = tmpl.NotBefore.Add(-48*time.Hour), tmpl.NotBefore
	return ca.issue(t, tmpl, usage)
}

func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.ExtKeyUsage, tmpl.KeyUsage = []x509.ExtKeyUsage{usage}, x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	name := tmpl.Subject.CommonName
	return writePEM(t, filepath.Join(ca.dir, name+".crt"), "CERTIFICATE", der),
		writePEM(t, filepath.Join(ca.dir, name+".key"), "EC PRIVATE KEY", keyDER)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func template(commonName string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
}

func writePEM(t testing.TB, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
