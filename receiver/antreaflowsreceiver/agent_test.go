package antreaflowsreceiver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/netip"
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
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/testpki"
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadatatest"
	"github.com/flowtel/flowtel/testbed/antreaagent"
	"github.com/flowtel/flowtel/testbed/ports"
)

// The test side of the wire: an Antrea agent's two exports, written from the
// facts of Antrea's agent (its IPFIX template, its Flow message); for IPFIX
// testbed/antreaagent's agent (go-ipfix's exporting process as the agent
// uses it), with what the agent writes for an agentRecord.

// agentValue is what the agent writes for the IE named: zero addresses for
// absent ones, the Egress IP as text.
func agentValue(name string, a *agentRecord, ipv6 bool) any {
	ip := func(x netip.Addr) net.IP {
		if !x.IsValid() {
			if ipv6 {
				return net.IPv6zero
			}
			return net.IPv4zero.To4()
		}
		return x.AsSlice()
	}
	egressIP := ""
	if a.egressAddr.IsValid() {
		egressIP = a.egressAddr.String()
	}
	switch name {
	case "flowStartSeconds":
		return uint32(a.start.Unix())
	case "flowEndSeconds":
		return uint32(a.end.Unix())
	case "flowEndReason":
		return a.endReason
	case "sourceTransportPort":
		return a.src.port
	case "destinationTransportPort":
		return a.dst.port
	case "protocolIdentifier":
		return a.protocol
	case "packetTotalCount":
		return a.stats.packetTotal
	case "octetTotalCount":
		return a.stats.octetTotal
	case "packetDeltaCount":
		return a.stats.packetDelta
	case "octetDeltaCount":
		return a.stats.octetDelta
	case "reversePacketTotalCount":
		return a.reverse.packetTotal
	case "reverseOctetTotalCount":
		return a.reverse.octetTotal
	case "reversePacketDeltaCount":
		return a.reverse.packetDelta
	case "reverseOctetDeltaCount":
		return a.reverse.octetDelta
	case "sourceIPv4Address", "sourceIPv6Address":
		return ip(a.src.addr)
	case "destinationIPv4Address", "destinationIPv6Address":
		return ip(a.dst.addr)
	case "sourcePodName":
		return a.src.pod
	case "sourcePodNamespace":
		return a.src.namespace
	case "sourceNodeName":
		return a.src.node
	case "destinationPodName":
		return a.dst.pod
	case "destinationPodNamespace":
		return a.dst.namespace
	case "destinationNodeName":
		return a.dst.node
	case "destinationServicePort":
		return a.servicePort
	case "destinationServicePortName":
		return a.servicePortName
	case "ingressNetworkPolicyName":
		return a.ingress.name
	case "ingressNetworkPolicyNamespace":
		return a.ingress.namespace
	case "ingressNetworkPolicyType":
		return a.ingress.typ
	case "ingressNetworkPolicyRuleName":
		return a.ingress.rule
	case "ingressNetworkPolicyRuleAction":
		return a.ingress.ruleAction
	case "egressNetworkPolicyName":
		return a.egress.name
	case "egressNetworkPolicyNamespace":
		return a.egress.namespace
	case "egressNetworkPolicyType":
		return a.egress.typ
	case "egressNetworkPolicyRuleName":
		return a.egress.rule
	case "egressNetworkPolicyRuleAction":
		return a.egress.ruleAction
	case "tcpState":
		return a.tcpState
	case "flowType":
		return a.flowType
	case "egressName":
		return a.egressName
	case "egressIP":
		return egressIP
	case "egressNodeName":
		return a.egressNode
	case "proxySnatPort":
		return a.proxySNATPort
	case "destinationClusterIPv4", "destinationClusterIPv6", "destinationServiceIPv4", "destinationServiceIPv6":
		return ip(a.serviceAddr)
	case "proxySnatIPv4", "proxySnatIPv6":
		return ip(a.proxySNATAddr)
	}
	panic("no value for IE " + name)
}

// agent is one Antrea agent's IPFIX export of agentRecords.
type agent struct{ *antreaagent.Agent }

func newAgent(t testing.TB, address, transport, node string, tlsCfg *ipfixexporter.ExporterTLSClientConfig) *agent {
	t.Helper()
	return newAgentWithout(t, address, transport, node, tlsCfg)
}

// newAgentWithout is newAgent with the IEs named left out of its templates
// (an agent of another version).
func newAgentWithout(t testing.TB, address, transport, node string, tlsCfg *ipfixexporter.ExporterTLSClientConfig, without ...string) *agent {
	t.Helper()
	a, err := antreaagent.New(address, transport, node, tlsCfg, without...)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return &agent{a}
}

// fnv1 is the agent's observation domain: FNV-1 (not 1a) of its Node name.
func fnv1(s string) uint32 { return antreaagent.ObservationDomain(s) }

func (g *agent) send(t testing.TB, r *agentRecord) {
	t.Helper()
	v6 := r.src.addr.Is6()
	require.NoError(t, g.Send(v6, func(name string) any { return agentValue(name, r, v6) }))
}

// toFlow is what the agent's gRPC exporter sends for r.
func toFlow(r *agentRecord) *pb.Flow {
	b := func(a netip.Addr) []byte {
		if !a.IsValid() {
			return nil
		}
		return a.AsSlice()
	}
	st := func(c agentCounters) *pb.Stats {
		return &pb.Stats{PacketTotalCount: c.packetTotal, OctetTotalCount: c.octetTotal, PacketDeltaCount: c.packetDelta, OctetDeltaCount: c.octetDelta}
	}
	ipv := pb.IPVersion_IP_VERSION_4
	if r.src.addr.Is6() {
		ipv = pb.IPVersion_IP_VERSION_6
	}
	f := &pb.Flow{
		Ipfix:     &pb.IPFIX{ExportTime: timestamppb.New(r.exportTime), ObservationDomainId: r.observationDomain},
		StartTs:   timestamppb.New(r.start),
		EndTs:     timestamppb.New(r.end),
		EndReason: pb.FlowEndReason(r.endReason),
		Ip:        &pb.IP{Version: ipv, Source: b(r.src.addr), Destination: b(r.dst.addr)},
		Transport: &pb.Transport{ProtocolNumber: uint32(r.protocol), SourcePort: uint32(r.src.port), DestinationPort: uint32(r.dst.port)},
		K8S: &pb.Kubernetes{
			FlowType: pb.FlowType(r.flowType), SourcePodNamespace: r.src.namespace, SourcePodName: r.src.pod, SourcePodUid: r.src.podUID,
			SourceNodeName: r.src.node, SourceNodeUid: r.src.nodeUID, DestinationPodNamespace: r.dst.namespace,
			DestinationPodName: r.dst.pod, DestinationPodUid: r.dst.podUID, DestinationNodeName: r.dst.node, DestinationNodeUid: r.dst.nodeUID,
			DestinationServicePort: uint32(r.servicePort), DestinationServicePortName: r.servicePortName, DestinationServiceUid: r.serviceUID,
			DestinationServiceIp:     b(r.serviceAddr),
			IngressNetworkPolicyType: pb.NetworkPolicyType(r.ingress.typ), IngressNetworkPolicyNamespace: r.ingress.namespace,
			IngressNetworkPolicyName: r.ingress.name, IngressNetworkPolicyUid: r.ingress.uid, IngressNetworkPolicyRuleName: r.ingress.rule,
			IngressNetworkPolicyRuleAction: pb.NetworkPolicyRuleAction(r.ingress.ruleAction),
			EgressNetworkPolicyType:        pb.NetworkPolicyType(r.egress.typ), EgressNetworkPolicyNamespace: r.egress.namespace,
			EgressNetworkPolicyName: r.egress.name, EgressNetworkPolicyUid: r.egress.uid, EgressNetworkPolicyRuleName: r.egress.rule,
			EgressNetworkPolicyRuleAction: pb.NetworkPolicyRuleAction(r.egress.ruleAction),
			EgressName:                    r.egressName, EgressIp: b(r.egressAddr), EgressNodeName: r.egressNode, EgressNodeUid: r.egressNodeUID, EgressUid: r.egressUID,
		},
		Stats:         st(r.stats),
		ReverseStats:  st(r.reverse),
		ProxySnatIp:   b(r.proxySNATAddr),
		ProxySnatPort: uint32(r.proxySNATPort),
	}
	if r.tcpState != "" {
		f.Transport.Protocol = &pb.Transport_Tcp{Tcp: &pb.TCP{StateName: r.tcpState}}
	}
	return f
}

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
	for _, f := range flows {
		if err := stream.Send(&pb.ExportRequest{Flows: []*pb.Flow{f}}); err != nil {
			_, err = stream.CloseAndRecv()
			return err
		}
	}
	_, err = stream.CloseAndRecv()
	return err
}

// exportGRPCRequest sends one request over a plaintext stream and closes it.
func exportGRPCRequest(t testing.TB, addr string, req *pb.ExportRequest) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := pb.NewFlowExportServiceClient(conn).Export(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(req); err != nil {
		return err
	}
	_, err = stream.CloseAndRecv()
	return err
}

func waitRecords(t testing.TB, sink *consumertest.LogsSink, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return sink.LogRecordCount() >= n }, 10*time.Second, 10*time.Millisecond,
		"want %d records, got %d", n, sink.LogRecordCount())
}
