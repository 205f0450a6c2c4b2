package servertlsextension

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/flowtel/flowtel/extension/servertlsextension/internal/metadata"
	"github.com/flowtel/flowtel/internal/configtest"
	"github.com/flowtel/flowtel/internal/testpki"
)

// Every attribute value the extension records is declared in metadata.yaml.
func TestAttributeValuesAreDeclared(t *testing.T) {
	configtest.Enum(t, "outcome", outcomeAccepted, outcomeRefused)
	configtest.Enum(t, "refusal_reason", reasonNoCertificate, reasonUnknownAuthority, reasonExpired, reasonBadCertificate, reasonOther)
}

// pki is a server CA with the server's certificate, the client CA with a
// client certificate, an expired one and a server-only one, and another CA
// with a client certificate of its own.
type pki struct {
	serverCA, clientCA              *testpki.CA
	serverCert, serverKey           string
	clientCert, clientKey           string
	expiredCert, expiredKey         string
	serverUsageCert, serverUsageKey string
	otherCert, otherKey             string
	decoyCert, decoyKey             string // from a third CA: the server's own tls block
}

func newPKI(t *testing.T) *pki {
	dir := t.TempDir()
	p := &pki{serverCA: testpki.NewCA(t, dir, "server-ca"), clientCA: testpki.NewCA(t, dir, "client-ca")}
	other, decoy := testpki.NewCA(t, dir, "other-ca"), testpki.NewCA(t, dir, "decoy-ca")
	p.serverCert, p.serverKey = p.serverCA.Issue(t, "server", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = p.clientCA.Issue(t, "node", x509.ExtKeyUsageClientAuth)
	p.expiredCert, p.expiredKey = p.clientCA.IssueExpired(t, "expired", x509.ExtKeyUsageClientAuth)
	p.serverUsageCert, p.serverUsageKey = p.clientCA.Issue(t, "server-usage", x509.ExtKeyUsageServerAuth)
	p.otherCert, p.otherKey = other.Issue(t, "other", x509.ExtKeyUsageClientAuth)
	p.decoyCert, p.decoyKey = decoy.Issue(t, "decoy", x509.ExtKeyUsageServerAuth)
	return p
}

// serve runs a gRPC server built by configgrpc, as the otlp receiver builds
// its own, with a tls block of its own (the decoy certificate, no client
// authentication) and the extension in its middlewares, and returns its
// address, the extension's telemetry and its logs.
func serve(t *testing.T, p *pki, cfg *Config) (string, *componenttest.Telemetry, *observer.ObservedLogs) {
	t.Helper()
	require.NoError(t, cfg.Validate())
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	core, logs := observer.New(zapcore.InfoLevel)
	set := tt.NewTelemetrySettings()
	set.Logger = zap.New(core)
	ext, err := newServerTLS(set, cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })

	id := component.NewID(metadata.Type)
	own := configtls.NewDefaultServerConfig()
	own.CertFile, own.KeyFile = p.decoyCert, p.decoyKey
	sc := configgrpc.NewDefaultServerConfig()
	sc.TLS = configoptional.Some(own)
	sc.Middlewares = []configmiddleware.Config{{ID: id}}
	srv, err := sc.ToServer(context.Background(), map[component.ID]component.Component{id: ext}, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String(), tt, logs
}

func extConfig(p *pki, clientCA string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile = p.serverCert, p.serverKey, clientCA
	return cfg
}

// clientTLS trusts the server CA only, so a handshake with the decoy
// certificate fails on the client's side.
func clientTLS(t *testing.T, p *pki, certFile, keyFile string) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(must(os.ReadFile(p.serverCA.CertFile))))
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if certFile != "" {
		// Presented whatever CAs the server names, as configtls's client does
		// (Go's Certificates would send none for another CA's).
		cert := must(tls.LoadX509KeyPair(certFile, keyFile))
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg
}

// check makes a gRPC call over cfg.
func check(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// handshakeOnce dials once and reads, so that a refusal the server sends
// after the client's side of the handshake (TLS 1.3) is seen.
func handshakeOnce(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// counts reads the handshake counter by outcome, and reason when refused.
func counts(t *testing.T, tt *componenttest.Telemetry) map[string]int64 {
	out := map[string]int64{}
	m, err := tt.GetMetric("otelcol_extension_server_tls_handshakes")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		key, _ := dp.Attributes.Value("outcome")
		if r, ok := dp.Attributes.Value("reason"); ok {
			key = attribute.StringValue(key.AsString() + "/" + r.AsString())
		}
		out[key.AsString()] += dp.Value
	}
	return out
}

func waitCounts(t *testing.T, tt *componenttest.Telemetry, want map[string]int64) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, counts(t, tt))
	}, 5*time.Second, 20*time.Millisecond)
}

// The server serves the extension's certificate (not its own tls block's),
// accepts the client CA's certificate and refuses, counting each by reason,
// a client without a certificate, with another CA's, with an expired one,
// with one not for client authentication, and one that does not speak TLS.
func TestHandshakesCountedByOutcome(t *testing.T) {
	p := newPKI(t)
	addr, tt, logs := serve(t, p, extConfig(p, p.clientCA.CertFile))

	require.NoError(t, check(t, addr, clientTLS(t, p, p.clientCert, p.clientKey)), "the client CA's certificate")
	waitCounts(t, tt, map[string]int64{"accepted": 1})

	for name, tc := range map[string]struct{ cert, key, reason string }{
		"without a certificate":          {"", "", "no_certificate"},
		"with another CA's certificate":  {p.otherCert, p.otherKey, "unknown_authority"},
		"with an expired certificate":    {p.expiredCert, p.expiredKey, "expired"},
		"with a server-only certificate": {p.serverUsageCert, p.serverUsageKey, "bad_certificate"},
	} {
		err := handshakeOnce(t, addr, clientTLS(t, p, tc.cert, tc.key))
		require.Error(t, err, "a client %s was accepted", name)
		t.Logf("client %s: %v", name, err)
	}
	plain, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = plain.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	require.NoError(t, err)
	_, _ = plain.Read(make([]byte, 1))
	require.NoError(t, plain.Close())

	waitCounts(t, tt, map[string]int64{"accepted": 1, "refused/no_certificate": 1, "refused/unknown_authority": 1,
		"refused/expired": 1, "refused/bad_certificate": 1, "refused/other": 1})

	// One warning per log interval (10 s by default): the first refusal, with
	// the peer's address.
	warns := logs.FilterMessage("TLS handshake refused").All()
	require.Len(t, warns, 1)
	assert.Equal(t, zapcore.WarnLevel, warns[0].Level)
	peer, ok := warns[0].ContextMap()["peer"].(string)
	require.True(t, ok, "peer field in %v", warns[0].ContextMap())
	host, _, err := net.SplitHostPort(peer)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
}

// The no-client-auth opt-out: with client_ca_file empty no certificate is
// asked for, and a client without one is accepted and counted.
func TestWithoutClientCAHandshakesAreAccepted(t *testing.T) {
	p := newPKI(t)
	addr, tt, _ := serve(t, p, extConfig(p, ""))
	require.NoError(t, check(t, addr, clientTLS(t, p, "", "")))
	require.NoError(t, check(t, addr, clientTLS(t, p, p.otherCert, p.otherKey)))
	waitCounts(t, tt, map[string]int64{"accepted": 2})
}

// A certificate that cannot be loaded fails the server's start, naming it.
func TestMissingCertificateFailsTheServer(t *testing.T) {
	p := newPKI(t)
	cfg := extConfig(p, p.clientCA.CertFile)
	cfg.TLS.CertFile = p.serverCert + ".missing"
	ext, err := newServerTLS(componenttest.NewNopTelemetrySettings(), cfg)
	require.NoError(t, err)
	_, err = ext.GetGRPCServerOptions(context.Background())
	require.ErrorContains(t, err, ".missing")
}

// A burst of refusals logs one line per interval; the next line says how many
// were not logged.
func TestRefusalLogIsRateLimited(t *testing.T) {
	l := refusalLog{interval: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	for i, tc := range []struct {
		at        time.Duration
		ok        bool
		notLogged int64
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{9 * time.Second, false, 0},
		{10 * time.Second, true, 2},
		{11 * time.Second, false, 0},
		{time.Minute, true, 1},
		{2 * time.Minute, true, 0},
	} {
		n, ok := l.take(t0.Add(tc.at))
		assert.Equal(t, tc.ok, ok, "refusal %d at %s logged", i, tc.at)
		assert.Equal(t, tc.notLogged, n, "refusal %d at %s: not logged before it", i, tc.at)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
