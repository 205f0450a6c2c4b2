package clickhouseflowsexporter

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowtel/flowtel/testbed/chserver"
)

// writeCerts writes a CA and a server certificate for 127.0.0.1 signed by it.
func writeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flowtel test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.crt", "CERTIFICATE", caDER), write("server.crt", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", keyDER)
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCerts(t, dir)
	srv := chserver.Start(t, chserver.Options{CertFile: certFile, KeyFile: keyFile})
	conn := client(t, srv)
	endpoint := fmt.Sprintf("tls://127.0.0.1:%d", srv.TLSPort)

	t.Run("ca_file", func(t *testing.T) {
		cfg := testConfig(srv, "tls_ca")
		cfg.Endpoint = endpoint
		cfg.TLS.CAFile = caFile
		exp, _ := startExporter(t, cfg)
		if err := exp.ConsumeLogs(context.Background(), logsOf("c", intraNodeRecord())); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the row", func() bool { return count(t, conn, "SELECT count() FROM tls_ca.flows") == 1 })
	})

	t.Run("insecure_skip_verify", func(t *testing.T) {
		cfg := testConfig(srv, "tls_skip")
		cfg.Endpoint = endpoint
		cfg.TLS.InsecureSkipVerify = true
		exp, _ := startExporter(t, cfg)
		if err := exp.ConsumeLogs(context.Background(), logsOf("c", intraNodeRecord())); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the row", func() bool { return count(t, conn, "SELECT count() FROM tls_skip.flows") == 1 })
	})

	t.Run("unknown CA is refused", func(t *testing.T) {
		cfg := testConfig(srv, "tls_bad")
		cfg.Endpoint = endpoint // system roots do not know our CA
		err := startErr(t, cfg)
		wantAll(t, err, "TLS with "+endpoint, "not trusted", "tls.ca_file")
	})
}
