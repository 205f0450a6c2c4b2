//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/testpki"
	"github.com/flowtel/flowtel/testbed/chserver"
)

func TestTLS(t *testing.T) {
	ca := testpki.NewCA(t, t.TempDir(), "ca")
	certFile, keyFile := ca.Issue(t, "server", x509.ExtKeyUsageServerAuth)
	srv := chserver.Start(t, chserver.Options{CertFile: certFile, KeyFile: keyFile})
	conn := client(t, srv)
	endpoint := fmt.Sprintf("tls://127.0.0.1:%d", srv.TLSPort)

	t.Run("ca_file", func(t *testing.T) {
		cfg := testConfig(srv, "tls_ca")
		cfg.Endpoint = endpoint
		cfg.TLS.CAFile = ca.CertFile
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
		wantAll(t, err, "tls: the server certificate of "+endpoint+" is not trusted", "set tls.ca_file")
	})
}
