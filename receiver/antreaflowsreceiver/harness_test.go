package antreaflowsreceiver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	ipfixexporter "github.com/vmware/go-ipfix/pkg/exporter"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/testpki"
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadatatest"
	"github.com/flowtel/flowtel/testbed/ports"
)

// The receiver the tests start, the agents' certificates, and the gRPC
// streams they send on.

// pki is a CA with the gateway's server certificate and an agent's client
// certificate, as Antrea's Flow Aggregator issues them.
type pki struct {
	ca                        *testpki.CA
	serverCert, serverKey     string
	clientCert, clientKey     string
	otherCA                   *testpki.CA
	strangerCert, strangerKey string
	expiredCert, expiredKey   string
}

func newPKI(t *testing.T) *pki {
	dir := t.TempDir()
	p := &pki{ca: testpki.NewCA(t, dir, "flow-aggregator-ca")}
	p.serverCert, p.serverKey = p.ca.Issue(t, "flow-aggregator", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = p.ca.Issue(t, "antrea-agent", x509.ExtKeyUsageClientAuth)
	p.expiredCert, p.expiredKey = p.ca.IssueExpired(t, "expired-agent", x509.ExtKeyUsageClientAuth)
	p.otherCA = testpki.NewCA(t, t.TempDir(), "other-ca")
	p.strangerCert, p.strangerKey = p.otherCA.Issue(t, "stranger", x509.ExtKeyUsageClientAuth)
	return p
}

func (p *pki) serverConfig() configoptional.Optional[configtls.ServerConfig] {
	return configoptional.Some(configtls.ServerConfig{
		Config:       configtls.Config{CertFile: p.serverCert, KeyFile: p.serverKey},
		ClientCAFile: p.ca.CertFile,
	})
}

// secure serves IPFIX over TLS and gRPC over TLS with the agents' client
// certificates required, as the shipped configurations do (no UDP beside TLS).
func (p *pki) secure(c *Config) {
	c.TLS = p.serverConfig()
	c.IPFIX.Transports = []string{transportTCP}
}

func readFile(t testing.TB, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// exporterTLS is the agent's IPFIX TLS client configuration with the named certificate ("" for none).
func (p *pki) exporterTLS(t testing.TB, cert, key string) *ipfixexporter.ExporterTLSClientConfig {
	c := &ipfixexporter.ExporterTLSClientConfig{CAData: readFile(t, p.ca.CertFile), ServerName: "127.0.0.1"}
	if cert != "" {
		c.CertData, c.KeyData = readFile(t, cert), readFile(t, key)
	}
	return c
}

// grpcTLS is the agent's gRPC TLS client configuration.
func (p *pki) grpcTLS(t testing.TB, cert, key string) credentials.TransportCredentials {
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(readFile(t, p.ca.CertFile)))
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		require.NoError(t, err)
		// Sent whatever CAs the server names, as an agent holding a wrong
		// certificate would (crypto/tls would otherwise send none).
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }
	}
	return credentials.NewTLS(c)
}

// started is a receiver running on free ports, its sink and its telemetry.
type started struct {
	cfg  *Config
	sink *consumertest.LogsSink
	tel  *componenttest.Telemetry
	r    *antreaReceiver
}

func freeAddr(t testing.TB, network string) string {
	t.Helper()
	// From below the ephemeral range (testbed/ports): a port taken with :0 and
	// closed again may become another connection's source port before the
	// receiver binds it ("address already in use").
	for range 100 {
		p, err := ports.Free()
		require.NoError(t, err)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		if network == "udp" {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				continue
			}
			pc.Close()
		}
		return addr
	}
	t.Fatalf("no free %s port on 127.0.0.1", network)
	return ""
}

// startReceiver starts a receiver on free loopback ports: IPFIX TCP and UDP
// on one port (a port free for both), gRPC on another.
func startReceiver(t *testing.T, mut func(*Config)) *started {
	t.Helper()
	return startReceiverTo(t, nil, mut)
}

// startReceiverTo is startReceiver handing its records to next (nil: a sink).
func startReceiverTo(t *testing.T, next consumer.Logs, mut func(*Config)) *started {
	t.Helper()
	cfg := createDefaultConfig()
	for {
		addr := freeAddr(t, "tcp")
		pc, err := net.ListenPacket("udp", addr)
		if err == nil {
			pc.Close()
			cfg.IPFIX.Endpoint = addr
			break
		}
	}
	cfg.GRPC.Endpoint = freeAddr(t, "tcp")
	if mut != nil {
		mut(cfg)
	}
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.LogsSink)
	if next == nil {
		next = sink
	}
	set := metadatatest.NewSettings(tel)
	rcv, err := NewFactory().CreateLogs(context.Background(), set, cfg, next)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, rcv.Shutdown(context.Background())) })
	return &started{cfg: cfg, sink: sink, tel: tel, r: rcv.(*antreaReceiver)}
}

// exportGRPC sends the flows over one FlowExportService stream, one flow per
// request as the agent does, and closes it.
func exportGRPC(t testing.TB, addr string, creds credentials.TransportCredentials, flows ...*pb.Flow) error {
	t.Helper()
	reqs := make([]*pb.ExportRequest, len(flows))
	for i, f := range flows {
		reqs[i] = &pb.ExportRequest{Flows: []*pb.Flow{f}}
	}
	return exportRequests(t, addr, creds, reqs...)
}

// exportGRPCRequest sends one request over a plaintext stream and closes it.
func exportGRPCRequest(t testing.TB, addr string, req *pb.ExportRequest) error {
	t.Helper()
	return exportRequests(t, addr, nil, req)
}

// exportRequests sends the requests over one stream (plaintext without
// creds) and closes it; the error is the stream's status.
func exportRequests(t testing.TB, addr string, creds credentials.TransportCredentials, reqs ...*pb.ExportRequest) error {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := pb.NewFlowExportServiceClient(conn).Export(ctx)
	if err != nil {
		return err
	}
	for _, req := range reqs {
		if err := stream.Send(req); err != nil {
			break // CloseAndRecv says why
		}
	}
	_, err = stream.CloseAndRecv()
	return err
}

func waitRecords(t testing.TB, sink *consumertest.LogsSink, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return sink.LogRecordCount() >= n }, 10*time.Second, 10*time.Millisecond,
		"want %d records, got %d", n, sink.LogRecordCount())
}
