package antreaflowsreceiver

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientsWithoutValidCertificateRefused: on both TLS ports a client
// without a certificate, with one from another CA or with an expired one is
// refused at the handshake and counted by reason; nothing it sends arrives.
func TestClientsWithoutValidCertificateRefused(t *testing.T) {
	p := newPKI(t)
	s := startReceiver(t, func(c *Config) { p.secure(c) })
	cases := []struct{ reason, cert, key string }{
		{handshakeNoCertificate, "", ""},
		{handshakeUnknownAuthority, p.strangerCert, p.strangerKey},
		{handshakeExpired, p.expiredCert, p.expiredKey},
	}
	for _, c := range cases {
		// IPFIX over TLS: the agent's message never reaches the decoder.
		cfg := clientTLS(t, p, c.cert, c.key)
		conn, err := tls.Dial("tcp", s.cfg.IPFIX.Endpoint, cfg)
		if err == nil {
			_, _ = conn.Write(make([]byte, 64))
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		require.Error(t, err, c.reason)
		// gRPC: the stream fails.
		src, _ := interNodeHalves(1)
		require.Error(t, exportGRPC(t, s.cfg.GRPC.Endpoint, p.grpcTLS(t, c.cert, c.key), toFlow(&src)), c.reason)
	}
	for _, c := range cases {
		assert.Eventually(t, func() bool {
			return s.counter(t, "otelcol_receiver_antrea_flows_clients_refused", "reason", c.reason) >= 2
		}, 5*time.Second, 10*time.Millisecond, "%s: refused on both ports", c.reason)
	}
	assert.Equal(t, 0, s.sink.LogRecordCount())
}

func clientTLS(t *testing.T, p *pki, cert, key string) *tls.Config {
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(readFile(t, p.ca.CertFile)))
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		require.NoError(t, err)
		// Sent whatever CAs the server names, as an agent holding a wrong
		// certificate would (crypto/tls would otherwise send none).
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }
	}
	return c
}
