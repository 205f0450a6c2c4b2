package ipfixexporter

import (
	"context"
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
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// testPKI writes a CA and a certificate it signed (for 127.0.0.1) as PEM files.
type testPKI struct{ dir string }

func (p testPKI) path(name string) string { return filepath.Join(p.dir, name) }

func newTestCA(t *testing.T, dir, prefix string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: prefix + " test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, prefix+"ca.crt"), "CERTIFICATE", der)
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func issue(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der)
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newTestPKI(t *testing.T) testPKI {
	dir := t.TempDir()
	ca, caKey := newTestCA(t, dir, "")
	issue(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	issue(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)
	newTestCA(t, dir, "other-") // a CA that signed nothing here
	return testPKI{dir}
}

// TestTLS: server verification with the test CA, mutual TLS with a client
// certificate, and a clear failure with the wrong CA or without a client
// certificate the collector requires. The go-ipfix collector decodes the records.
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	cases := []struct {
		name      string
		mtls      bool
		ca        string
		clientCrt bool
		wantErr   string
	}{
		{"server-verified", false, "ca.crt", false, ""},
		{"mutual", true, "ca.crt", true, ""},
		{"wrong-ca", false, "other-ca.crt", false, "certificate signed by unknown authority"},
		{"mutual-without-client-cert", true, "ca.crt", false, "certificate required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tlsOpts := &ipfixcollector.TLS{ServerCert: pki.path("server.crt"), ServerKey: pki.path("server.key")}
			if c.mtls {
				tlsOpts.ClientCA = pki.path("ca.crt")
			}
			col := startCollector(t, "tcp", tlsOpts)
			cfg := testConfig(col.Endpoint(), TransportTLS, layout.Aggregate)
			cfg.TLS.CAFile = pki.path(c.ca)
			cfg.TLS.MinVersion = "1.3"
			if c.clientCrt {
				cfg.TLS.CertFile, cfg.TLS.KeyFile = pki.path("client.crt"), pki.path("client.key")
			}
			e, _ := testExporter(t, cfg, nsDialer(col.Netns()))
			err := e.pushLogs(context.Background(), logsOf(recordsWithPorts(5000, 5)...))
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if p := ports(waitRecords(t, col, 5)); !p["5000"] || !p["5004"] {
					t.Fatalf("records did not decode over TLS: ports %v", p)
				}
				return
			}
			// With TLS 1.3 the server's rejection of a missing client certificate
			// arrives after the handshake, at the first write or in the next push.
			for i := 0; err == nil && i < 20; i++ {
				time.Sleep(50 * time.Millisecond)
				err = e.pushLogs(context.Background(), logsOf(recordsWithPorts(5000, 5)...))
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
			}
			if recs, _ := col.Records(); len(recs) != 0 {
				t.Fatalf("collector decoded %d records over a rejected connection", len(recs))
			}
		})
	}
}
