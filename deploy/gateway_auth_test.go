//go:build integration

package deploy_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/flowtel/flowtel/distributions"
	bedcollector "github.com/flowtel/flowtel/testbed/collector"
)

// ca is a test certificate authority.
type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
	file string
}

var certSerial atomic.Int64

func newTestCA(t *testing.T, dir, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(certSerial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	file := filepath.Join(dir, name+".crt")
	writeFileAtomic(t, file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return &ca{cert: cert, key: key, file: file}
}

// issueCert signs a certificate for usage (and dnsNames) valid until
// notAfter, writes it and its key to dir/<name>.crt and .key (replacing them
// atomically, as the kubelet swaps a Secret volume's files) and returns its
// serial number and the files.
func issueCert(t *testing.T, caCert *x509.Certificate, caKey crypto.Signer, dir, name string, usage x509.ExtKeyUsage, dnsNames []string, notAfter time.Time) (serial *big.Int, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial = big.NewInt(time.Now().UnixNano() + certSerial.Add(1))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: dnsNames,
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFileAtomic(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	writeFileAtomic(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return serial, certFile, keyFile
}

func (c *ca) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage, dnsNames []string, notAfter time.Time) (*big.Int, string, string) {
	t.Helper()
	return issueCert(t, c.cert, c.key, dir, name, usage, dnsNames, notAfter)
}

func writeFileAtomic(t *testing.T, file string, b []byte) {
	t.Helper()
	tmp := file + ".tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, file))
}

const gatewayTLSName = "flowtel-gateway.flowtel.svc" // what the shipped node config verifies

// startGateway runs the built gateway on its shipped configuration with the
// certificates from the environment the deployments set, and an overlay for
// loopback: ports, no Kubernetes index, and short timers (certificates
// reloaded every 500 ms instead of every minute, by server_tls, which serves
// the port, and by the receiver's fallback block; connections re-established
// after connectionAge instead of an hour), and no node_identity: these
// tests are about who may connect; the records they send are not a Node's
// (node_identity runs against a real API server in its own tests and the
// end-to-end bed).
func startGateway(t *testing.T, dir, certFile, keyFile, clientCAFile, connectionAge string, extra ...string) (*bedcollector.Process, int) {
	t.Helper()
	bin, err := bedcollector.Binary(repoRoot(), distributions.Gateway)
	require.NoError(t, err)
	otlpPort, health, metrics := freePort(t), freePort(t), freePort(t)
	overlay := fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:%d"}
  server_tls: {tls: {reload_interval: 500ms}}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
        keepalive: {server_parameters: {max_connection_age: %s, max_connection_age_grace: 2s}}
        tls: {reload_interval: 500ms}
processors:
  flow_correlation: {kubernetes: {enabled: false}}
service:
  telemetry:
    metrics:
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]
  pipelines:
    logs: {processors: [memory_limiter, flow_correlation]}
`, health, otlpPort, connectionAge, metrics)
	configs := []string{distributions.Config(distributions.Gateway)}
	for i, e := range extra { // between the shipped file and the overlay
		file := filepath.Join(dir, fmt.Sprintf("gateway-extra-%d.yaml", i))
		require.NoError(t, os.WriteFile(file, []byte(e), 0o600))
		configs = append(configs, file)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := bedcollector.Start(ctx, bedcollector.Options{Name: "gateway", Binary: bin, Dir: dir,
		Configs: configs, Config: overlay,
		Env: []string{"FLOWTEL_TLS_CERT_FILE=" + certFile, "FLOWTEL_TLS_KEY_FILE=" + keyFile, "FLOWTEL_TLS_CLIENT_CA_FILE=" + clientCAFile,
			"POD_NAMESPACE=flowtel"},
		HealthPort: health, MetricsPort: metrics})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("gateway: %v", err)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", p.LogTail(40))
		}
	})
	return p, otlpPort
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := bedcollector.FreePort()
	require.NoError(t, err)
	return p
}

// handshakes is the gateway's server_tls handshake counter, keyed by outcome
// ("accepted") or outcome and reason ("refused/expired").
func handshakes(t *testing.T, p *bedcollector.Process) map[string]float64 {
	t.Helper()
	m, err := p.Metrics("otelcol_extension_server_tls_handshakes")
	if err != nil {
		t.Errorf("scraping %s: %v", p.Name, err)
		return nil
	}
	out := map[string]float64{}
	for k, v := range m {
		key := label(k, "outcome")
		if r := label(k, "reason"); r != "" {
			key += "/" + r
		}
		out[key] += v
	}
	return out
}

// label is the value of a label in a sample's "name{labels}".
func label(sample, name string) string {
	_, rest, ok := strings.Cut(sample, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// metric sums a counter's samples (every label set) on the gateway.
func metric(t *testing.T, p *bedcollector.Process, name string) float64 {
	t.Helper()
	m, err := p.Metrics(name)
	if err != nil { // Errorf, not FailNow: Eventually calls this from another goroutine
		t.Errorf("scraping %s: %v", p.Name, err)
		return -1
	}
	var sum float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") || strings.HasPrefix(k, name+"_total") {
			sum += v
		}
	}
	return sum
}

// nodeExporter builds, in process, the node distribution's load_balancing
// exporter from the shipped node configuration, resolved with the environment
// the DaemonSet gives it (certificate files as mounted), pointed at the
// gateway on loopback through a static resolver, without the persistent queue
// (no file_storage here) and with the client certificate reloaded every
// 500 ms instead of every minute.
func nodeExporter(t *testing.T, gatewayCA, certFile, keyFile string, otlpPort int) exporter.Logs {
	t.Helper()
	for k, v := range map[string]string{"POD_NAMESPACE": "flowtel", "K8S_NODE_NAME": "node-1", "FLOWTEL_GATEWAY_CA_FILE": gatewayCA,
		"FLOWTEL_TLS_CERT_FILE": certFile, "FLOWTEL_TLS_KEY_FILE": keyFile} {
		t.Setenv(k, v)
	}
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{distributions.Config(distributions.Node)},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	require.NoError(t, err)
	conf, err := resolver.Resolve(context.Background())
	require.NoError(t, err)
	lb, err := conf.Sub("exporters::load_balancing")
	require.NoError(t, err)
	require.NoError(t, lb.Merge(confmap.NewFromStringMap(map[string]any{
		"sending_queue": map[string]any{"storage": nil},
		"protocol": map[string]any{"otlp": map[string]any{
			"tls": map[string]any{"reload_interval": "500ms"},
			// No bearertokenauth extension in process: no token.
			"auth": nil,
		}},
		"resolver": map[string]any{"k8s": map[string]any{"enabled": false},
			"static": map[string]any{"hostnames": []any{fmt.Sprintf("127.0.0.1:%d", otlpPort)}}},
	})))
	factories, err := distributions.Factories(distributions.Node)
	require.NoError(t, err)
	f := factories.Exporters[component.MustNewType("loadbalancing")]
	cfg := f.CreateDefaultConfig()
	require.NoError(t, lb.Unmarshal(cfg))
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	return exp
}

// records makes n flow records with distinct flow.key values.
func records(from, n int) plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for i := range n {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetEventName("network.flow")
		lr.Attributes().PutStr("flow.key", fmt.Sprintf("k-%d", from+i))
	}
	return ld
}

// exportWith sends one record over OTLP/gRPC with a client TLS config and
// returns the error.
func exportWith(t *testing.T, otlpPort int, cfg *tls.Config) error {
	t.Helper()
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", otlpPort), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = plogotlp.NewGRPCClient(cc).Export(ctx, plogotlp.NewExportRequestFromLogs(records(-1, 1)))
	return err
}

func clientTLS(t *testing.T, rootCA, certFile, keyFile string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(rootCA)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(b))
	cfg := &tls.Config{RootCAs: pool, ServerName: gatewayTLSName, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		// Sent whatever CAs the gateway names, as the node collector's
		// configtls client does (with Certificates, Go sends no certificate of
		// a CA the server does not name).
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	return cfg
}

// The built gateway on its shipped settings, on loopback: clients without a
// certificate, with another CA's and with an expired one are refused, no
// record of theirs is accepted, and each refusal is counted with its reason
// and logged; the node collector's load_balancing exporter on its shipped
// settings is accepted, and its handshakes counted so. Then, mid-stream and without restarting
// either side, the gateway's certificate, the client CA and the node's client
// certificate are all replaced: the gateway serves the new certificate,
// refuses the old CA's clients, the node collector reconnects with its new
// certificate, and every record sent is accepted.
func TestGatewayAuthenticatesAndRotates(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA1, clientCA2 := newTestCA(t, dir, "server-ca"), newTestCA(t, dir, "client-ca-1"), newTestCA(t, dir, "client-ca-2")
	day := time.Now().Add(24 * time.Hour)
	_, gwCert, gwKey := serverCA.issue(t, dir, "gateway", x509.ExtKeyUsageServerAuth, []string{gatewayTLSName}, day)
	clientCAFile := filepath.Join(dir, "client-ca.crt") // the gateway's client_ca_file, rotated below
	writeFileAtomic(t, clientCAFile, must(os.ReadFile(clientCA1.file)))
	_, nodeCert, nodeKey := clientCA1.issue(t, dir, "node", x509.ExtKeyUsageClientAuth, nil, day)
	_, otherCert, otherKey := clientCA2.issue(t, dir, "other", x509.ExtKeyUsageClientAuth, nil, day)
	_, expiredCert, expiredKey := clientCA1.issue(t, dir, "expired", x509.ExtKeyUsageClientAuth, nil, time.Now().Add(-time.Hour))

	gw, port := startGateway(t, dir, gwCert, gwKey, clientCAFile, "2s")
	const accepted = "otelcol_receiver_accepted_log_records"

	for name, tc := range map[string]struct {
		cfg    *tls.Config
		reason string
	}{
		"without a certificate":         {clientTLS(t, serverCA.file, "", ""), "no_certificate"},
		"with another CA's certificate": {clientTLS(t, serverCA.file, otherCert, otherKey), "unknown_authority"},
		"with an expired certificate":   {clientTLS(t, serverCA.file, expiredCert, expiredKey), "expired"},
	} {
		err := exportWith(t, port, tc.cfg)
		require.Error(t, err, "a client %s was accepted", name)
		t.Logf("client %s: %v", name, err)
		// Counted with its reason (the gRPC client may have tried more than once).
		require.Eventually(t, func() bool { return handshakes(t, gw)["refused/"+tc.reason] >= 1 }, 5*time.Second, 100*time.Millisecond,
			"a client %s refused but not counted %s: %v", name, tc.reason, handshakes(t, gw))
	}
	require.Zero(t, metric(t, gw, accepted), "the gateway accepted records from refused clients")
	counted := handshakes(t, gw)
	require.Zero(t, counted["accepted"], "handshakes counted accepted: %v", counted)
	require.Len(t, counted, 3, "handshakes by outcome and reason: %v", counted)
	t.Logf("refused handshakes counted: %v", counted)
	logTail := gw.LogTail(200)
	require.Contains(t, logTail, "TLS handshake refused", "the first refusal is logged")
	for _, l := range strings.Split(logTail, "\n") {
		if strings.Contains(l, "TLS handshake refused") {
			t.Logf("gateway log: %s", l)
		}
	}
	require.NoError(t, exportWith(t, port, clientTLS(t, serverCA.file, nodeCert, nodeKey)), "the node collector's certificate was refused")
	require.Equal(t, 1.0, metric(t, gw, accepted))
	require.Equal(t, 1.0, handshakes(t, gw)["accepted"], "the node collector's handshake")

	// The node collector on its shipped settings streams records.
	exp := nodeExporter(t, serverCA.file, nodeCert, nodeKey, port)
	var sent atomic.Int64
	sent.Add(1) // the probe above
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i += 10 {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := exp.ConsumeLogs(context.Background(), records(i, 10)); err != nil {
				t.Errorf("node exporter: %v", err)
				return
			}
			sent.Add(10)
		}
	}()
	require.Eventually(t, func() bool { return metric(t, gw, accepted) > 100 }, 10*time.Second, 200*time.Millisecond, "records from the node exporter")

	// Rotation mid-stream: new gateway certificate, client CA 1 -> 2, the
	// node's certificate from CA 2.
	newSerial, _, _ := serverCA.issue(t, dir, "gateway", x509.ExtKeyUsageServerAuth, []string{gatewayTLSName}, day)
	writeFileAtomic(t, clientCAFile, must(os.ReadFile(clientCA2.file)))
	clientCA2.issue(t, dir, "node", x509.ExtKeyUsageClientAuth, nil, day)
	rotated := metric(t, gw, accepted)

	ca2Client := clientTLS(t, serverCA.file, otherCert, otherKey)
	require.Eventually(t, func() bool {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), ca2Client)
		if err != nil {
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(newSerial) == 0
	}, 10*time.Second, 200*time.Millisecond, "the gateway serving its new certificate")
	_, oldCert, oldKey := clientCA1.issue(t, dir, "old-ca-client", x509.ExtKeyUsageClientAuth, nil, day)
	ca1Client := clientTLS(t, serverCA.file, oldCert, oldKey)
	require.Eventually(t, func() bool { return exportWith(t, port, ca1Client) != nil }, 10*time.Second, 200*time.Millisecond, "the old client CA refused")
	// Connections live 2 s: after several, the node exporter is on its new
	// certificate (the old CA's are refused by now).
	time.Sleep(6 * time.Second)
	require.Eventually(t, func() bool { return metric(t, gw, accepted) > rotated+200 }, 10*time.Second, 200*time.Millisecond, "records after the rotation")
	require.NoError(t, exportWith(t, port, clientTLS(t, serverCA.file, otherCert, otherKey)), "CA 2's client refused after the rotation")
	sent.Add(1)

	close(stop)
	<-done
	require.NoError(t, exp.Shutdown(context.Background())) // drains the queue
	require.Eventually(t, func() bool { return metric(t, gw, accepted) >= float64(sent.Load()) }, 30*time.Second, 200*time.Millisecond, "every record sent accepted")
	// At least once: a batch whose connection reached its max age after the
	// gateway took it but before the answer is sent again.
	got := metric(t, gw, accepted)
	require.GreaterOrEqual(t, got, float64(sent.Load()), "records accepted by the gateway vs sent")
	t.Logf("sent %d records across the rotation, the gateway accepted %v (%v again after a connection ended)", sent.Load(), got, got-float64(sent.Load()))
	// The node collector reconnected every 2 s, each time counted accepted;
	// the old CA's client after the rotation was counted refused.
	counted = handshakes(t, gw)
	require.Greater(t, counted["accepted"], 3.0, "handshakes: %v", counted)
	require.Greater(t, counted["refused/unknown_authority"], 1.0, "handshakes: %v", counted)
	t.Logf("handshakes counted: %v", counted)
}

// The no-client-auth opt-out (FLOWTEL_TLS_CLIENT_CA_FILE empty) on the built
// gateway: a client without a certificate is accepted over TLS and its
// handshake counted accepted.
func TestGatewayWithoutClientAuthCountsAccepted(t *testing.T) {
	dir := t.TempDir()
	serverCA := newTestCA(t, dir, "server-ca")
	_, gwCert, gwKey := serverCA.issue(t, dir, "gateway", x509.ExtKeyUsageServerAuth, []string{gatewayTLSName}, time.Now().Add(24*time.Hour))
	gw, port := startGateway(t, dir, gwCert, gwKey, "", "1h")
	require.NoError(t, exportWith(t, port, clientTLS(t, serverCA.file, "", "")), "a client without a certificate")
	require.Equal(t, 1.0, metric(t, gw, "otelcol_receiver_accepted_log_records"))
	require.Equal(t, map[string]float64{"accepted": 1}, handshakes(t, gw))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
