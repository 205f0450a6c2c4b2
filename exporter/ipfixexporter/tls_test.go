//go:build integration

package ipfixexporter

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/internal/testpki"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// TestTLS: server verification with the test CA, mutual TLS with a client
// certificate, and a clear failure with the wrong CA or without a client
// certificate the collector requires. The go-ipfix collector decodes the records.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	serverCrt, serverKey := ca.Issue(t, "server", x509.ExtKeyUsageServerAuth)
	clientCrt, clientKey := ca.Issue(t, "client", x509.ExtKeyUsageClientAuth)
	otherCA := testpki.NewCA(t, dir, "other-ca") // a CA that signed nothing here
	cases := []struct {
		name      string
		mtls      bool
		ca        *testpki.CA
		clientCrt bool
		wantErr   string
	}{
		{"server-verified", false, ca, false, ""},
		{"mutual", true, ca, true, ""},
		{"wrong-ca", false, otherCA, false, "certificate signed by unknown authority"},
		{"mutual-without-client-cert", true, ca, false, "certificate required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tlsOpts := &ipfixcollector.TLS{ServerCert: serverCrt, ServerKey: serverKey}
			if c.mtls {
				tlsOpts.ClientCA = ca.CertFile
			}
			col := startCollector(t, "tcp", tlsOpts)
			cfg := testConfig(col.Endpoint(), TransportTLS, layout.Aggregate)
			cfg.TLS.CAFile = c.ca.CertFile
			cfg.TLS.MinVersion = "1.3"
			if c.clientCrt {
				cfg.TLS.CertFile, cfg.TLS.KeyFile = clientCrt, clientKey
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
