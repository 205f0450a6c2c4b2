package antreaflowsreceiver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/go-ipfix/pkg/entities"
	ipfixexporter "github.com/vmware/go-ipfix/pkg/exporter"
	"github.com/vmware/go-ipfix/pkg/registry"
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
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/testpki"
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadatatest"
	"github.com/flowtel/flowtel/testbed/ports"
)

// The test side of the wire: an Antrea agent's two exports, written from the
// facts of Antrea's agent (its IPFIX template, its Flow message), with
// go-ipfix's exporting process for IPFIX as the agent uses it.

var loadRegistry sync.Once

// agentIEs is Antrea's agent template: 43 IEs in the agent's order; the
// IPv6 template swaps the address IEs for their IPv6 forms.
func agentIEs(ipv6 bool) []struct {
	name string
	ent  uint32
} {
	fam := func(v4, v6 string) string {
		if ipv6 {
			return v6
		}
		return v4
	}
	type ie = struct {
		name string
		ent  uint32
	}
	out := []ie{}
	for _, n := range []string{"flowStartSeconds", "flowEndSeconds", "flowEndReason", "sourceTransportPort",
		"destinationTransportPort", "protocolIdentifier", "packetTotalCount", "octetTotalCount", "packetDeltaCount",
		"octetDeltaCount", fam("sourceIPv4Address", "sourceIPv6Address"), fam("destinationIPv4Address", "destinationIPv6Address")} {
		out = append(out, ie{n, registry.IANAEnterpriseID})
	}
	for _, n := range []string{"reversePacketTotalCount", "reverseOctetTotalCount", "reversePacketDeltaCount", "reverseOctetDeltaCount"} {
		out = append(out, ie{n, registry.IANAReversedEnterpriseID})
	}
	for _, n := range []string{"sourcePodName", "sourcePodNamespace", "sourceNodeName", "destinationPodName",
		"destinationPodNamespace", "destinationNodeName", "destinationServicePort", "destinationServicePortName",
		"ingressNetworkPolicyName", "ingressNetworkPolicyNamespace", "ingressNetworkPolicyType",
		"ingressNetworkPolicyRuleName", "ingressNetworkPolicyRuleAction", "egressNetworkPolicyName",
		"egressNetworkPolicyNamespace", "egressNetworkPolicyType", "egressNetworkPolicyRuleName",
		"egressNetworkPolicyRuleAction", "tcpState", "flowType", "egressName", "egressIP", "egressNodeName",
		"proxySnatPort", fam("destinationClusterIPv4", "destinationClusterIPv6"), fam("proxySnatIPv4", "proxySnatIPv6"),
		fam("destinationServiceIPv4", "destinationServiceIPv6")} {
		out = append(out, ie{n, registry.AntreaEnterpriseID})
	}
	return out
}

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
	if a.Egress.Address.IsValid() {
		egressIP = a.Egress.Address.String()
	}
	switch name {
	case "flowStartSeconds":
		return uint32(a.Start.Unix())
	case "flowEndSeconds":
		return uint32(a.End.Unix())
	case "flowEndReason":
		return uint8(a.EndReason)
	case "sourceTransportPort":
		return a.Source.Port
	case "destinationTransportPort":
		return a.Destination.Port
	case "protocolIdentifier":
		return a.Protocol
	case "packetTotalCount":
		return a.Stats.PacketTotal
	case "octetTotalCount":
		return a.Stats.OctetTotal
	case "packetDeltaCount":
		return a.Stats.PacketDelta
	case "octetDeltaCount":
		return a.Stats.OctetDelta
	case "reversePacketTotalCount":
		return a.ReverseStats.PacketTotal
	case "reverseOctetTotalCount":
		return a.ReverseStats.OctetTotal
	case "reversePacketDeltaCount":
		return a.ReverseStats.PacketDelta
	case "reverseOctetDeltaCount":
		return a.ReverseStats.OctetDelta
	case "sourceIPv4Address", "sourceIPv6Address":
		return ip(a.Source.Address)
	case "destinationIPv4Address", "destinationIPv6Address":
		return ip(a.Destination.Address)
	case "sourcePodName":
		return a.Source.PodName
	case "sourcePodNamespace":
		return a.Source.Namespace
	case "sourceNodeName":
		return a.Source.NodeName
	case "destinationPodName":
		return a.Destination.PodName
	case "destinationPodNamespace":
		return a.Destination.Namespace
	case "destinationNodeName":
		return a.Destination.NodeName
	case "destinationServicePort":
		return a.Service.Port
	case "destinationServicePortName":
		return a.Service.PortName
	case "ingressNetworkPolicyName":
		return a.IngressPolicy.Name
	case "ingressNetworkPolicyNamespace":
		return a.IngressPolicy.Namespace
	case "ingressNetworkPolicyType":
		return uint8(a.IngressPolicy.Type)
	case "ingressNetworkPolicyRuleName":
		return a.IngressPolicy.RuleName
	case "ingressNetworkPolicyRuleAction":
		return uint8(a.IngressPolicy.RuleAction)
	case "egressNetworkPolicyName":
		return a.EgressPolicy.Name
	case "egressNetworkPolicyNamespace":
		return a.EgressPolicy.Namespace
	case "egressNetworkPolicyType":
		return uint8(a.EgressPolicy.Type)
	case "egressNetworkPolicyRuleName":
		return a.EgressPolicy.RuleName
	case "egressNetworkPolicyRuleAction":
		return uint8(a.EgressPolicy.RuleAction)
	case "tcpState":
		return a.TCPState
	case "flowType":
		return uint8(a.FlowType)
	case "egressName":
		return a.Egress.Name
	case "egressIP":
		return egressIP
	case "egressNodeName":
		return a.Egress.NodeName
	case "proxySnatPort":
		return a.ProxySNATPort
	case "destinationClusterIPv4", "destinationClusterIPv6", "destinationServiceIPv4", "destinationServiceIPv6":
		return ip(a.Service.Address)
	case "proxySnatIPv4", "proxySnatIPv6":
		return ip(a.ProxySNATAddress)
	}
	panic("no value for IE " + name)
}

// agent is one Antrea agent's IPFIX export: a go-ipfix exporting process
// that announces the IPv4 and IPv6 agent templates (256, 257) on connecting
// and sends one record per message, as the agent does.
type agent struct {
	ep       *ipfixexporter.ExportingProcess
	elements map[bool][]*entities.InfoElement
	tid      map[bool]uint16
}

func newAgent(t testing.TB, address, transport, node string, tlsCfg *ipfixexporter.ExporterTLSClientConfig) *agent {
	t.Helper()
	return newAgentWithout(t, address, transport, node, tlsCfg)
}

// newAgentWithout is newAgent with the IEs named left out of its templates
// (an agent of another version).
func newAgentWithout(t testing.TB, address, transport, node string, tlsCfg *ipfixexporter.ExporterTLSClientConfig, without ...string) *agent {
	t.Helper()
	loadRegistry.Do(registry.LoadRegistry)
	ep, err := ipfixexporter.InitExportingProcess(ipfixexporter.ExporterInput{
		CollectorAddress: address, CollectorProtocol: transport, ObservationDomainID: fnv1(node),
		TempRefTimeout: 600, TLSClientConfig: tlsCfg,
	})
	require.NoError(t, err)
	t.Cleanup(ep.CloseConnToCollector)
	a := &agent{ep: ep, elements: map[bool][]*entities.InfoElement{}, tid: map[bool]uint16{}}
	for _, v6 := range []bool{false, true} {
		for _, ie := range agentIEs(v6) {
			if slices.Contains(without, ie.name) {
				continue
			}
			e, err := registry.GetInfoElement(ie.name, ie.ent)
			require.NoError(t, err, ie.name)
			a.elements[v6] = append(a.elements[v6], e)
		}
		a.tid[v6] = a.announce(t, a.elements[v6])
	}
	return a
}

// announce sends a new template of the elements and returns its ID.
func (g *agent) announce(t testing.TB, elements []*entities.InfoElement) uint16 {
	t.Helper()
	var ies []entities.InfoElementWithValue
	for _, e := range elements {
		iev, err := entities.DecodeAndCreateInfoElementWithValue(e, nil)
		require.NoError(t, err)
		ies = append(ies, iev)
	}
	tid := g.ep.NewTemplateID()
	set := entities.NewSet(false)
	require.NoError(t, set.PrepareSet(entities.Template, tid))
	require.NoError(t, set.AddRecordV2(ies, tid))
	_, err := g.ep.SendSet(set)
	require.NoError(t, err)
	return tid
}

// fnv1 is the agent's observation domain: FNV-1 (not 1a) of its Node name.
func fnv1(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h * 16777619) ^ uint32(s[i])
	}
	return h
}

func (g *agent) send(t testing.TB, r *agentRecord) {
	t.Helper()
	v6 := r.Source.Address.Is6()
	ies := make([]entities.InfoElementWithValue, 0, 43)
	for _, e := range g.elements[v6] {
		ies = append(ies, withValue(e, agentValue(e.Name, r, v6)))
	}
	g.sendData(t, g.tid[v6], ies)
}

// withValue is e carrying v, a value of e's Go type as agentValue gives it
// (a uint32 is a dateTimeSeconds).
func withValue(e *entities.InfoElement, v any) entities.InfoElementWithValue {
	switch v := v.(type) {
	case uint8:
		return entities.NewUnsigned8InfoElement(e, v)
	case uint16:
		return entities.NewUnsigned16InfoElement(e, v)
	case uint32:
		if e.DataType == entities.Unsigned32 {
			return entities.NewUnsigned32InfoElement(e, v)
		}
		return entities.NewDateTimeSecondsInfoElement(e, v)
	case uint64:
		return entities.NewUnsigned64InfoElement(e, v)
	case string:
		return entities.NewStringInfoElement(e, v)
	case net.IP:
		return entities.NewIPAddressInfoElement(e, v)
	}
	panic(fmt.Sprintf("IE %s: no encoding of %T", e.Name, v))
}

// sendData sends one data set of template tid with one record.
func (g *agent) sendData(t testing.TB, tid uint16, ies []entities.InfoElementWithValue) {
	t.Helper()
	set := entities.NewSet(false)
	require.NoError(t, set.PrepareSet(entities.Data, tid))
	require.NoError(t, set.AddRecordV2(ies, tid))
	_, err := g.ep.SendSet(set)
	require.NoError(t, err)
}

// toFlow is what the agent's gRPC exporter sends for r.
func toFlow(r *agentRecord) *pb.Flow {
	b := func(a netip.Addr) []byte {
		if !a.IsValid() {
			return nil
		}
		return a.AsSlice()
	}
	st := func(c flowrecord.Counters) *pb.Stats {
		return &pb.Stats{PacketTotalCount: c.PacketTotal, OctetTotalCount: c.OctetTotal, PacketDeltaCount: c.PacketDelta, OctetDeltaCount: c.OctetDelta}
	}
	ipv := pb.IPVersion_IP_VERSION_4
	if r.Source.Address.Is6() {
		ipv = pb.IPVersion_IP_VERSION_6
	}
	src, dst, in, out := &r.Source, &r.Destination, &r.IngressPolicy, &r.EgressPolicy
	f := &pb.Flow{
		Ipfix:     &pb.IPFIX{ExportTime: timestamppb.New(r.Observed), ObservationDomainId: r.domain},
		StartTs:   timestamppb.New(r.Start),
		EndTs:     timestamppb.New(r.End),
		EndReason: pb.FlowEndReason(r.EndReason),
		Ip:        &pb.IP{Version: ipv, Source: b(src.Address), Destination: b(dst.Address)},
		Transport: &pb.Transport{ProtocolNumber: uint32(r.Protocol), SourcePort: uint32(src.Port), DestinationPort: uint32(dst.Port)},
		K8S: &pb.Kubernetes{
			FlowType: pb.FlowType(r.FlowType), SourcePodNamespace: src.Namespace, SourcePodName: src.PodName, SourcePodUid: src.PodUID,
			SourceNodeName: src.NodeName, SourceNodeUid: src.NodeUID, DestinationPodNamespace: dst.Namespace,
			DestinationPodName: dst.PodName, DestinationPodUid: dst.PodUID, DestinationNodeName: dst.NodeName, DestinationNodeUid: dst.NodeUID,
			DestinationServicePort: uint32(r.Service.Port), DestinationServicePortName: r.Service.PortName, DestinationServiceUid: r.Service.UID,
			DestinationServiceIp:     b(r.Service.Address),
			IngressNetworkPolicyType: pb.NetworkPolicyType(in.Type), IngressNetworkPolicyNamespace: in.Namespace,
			IngressNetworkPolicyName: in.Name, IngressNetworkPolicyUid: in.UID, IngressNetworkPolicyRuleName: in.RuleName,
			IngressNetworkPolicyRuleAction: pb.NetworkPolicyRuleAction(in.RuleAction),
			EgressNetworkPolicyType:        pb.NetworkPolicyType(out.Type), EgressNetworkPolicyNamespace: out.Namespace,
			EgressNetworkPolicyName: out.Name, EgressNetworkPolicyUid: out.UID, EgressNetworkPolicyRuleName: out.RuleName,
			EgressNetworkPolicyRuleAction: pb.NetworkPolicyRuleAction(out.RuleAction),
			EgressName:                    r.Egress.Name, EgressIp: b(r.Egress.Address), EgressNodeName: r.Egress.NodeName,
			EgressNodeUid: r.Egress.NodeUID, EgressUid: r.Egress.UID,
		},
		Stats:         st(r.Stats),
		ReverseStats:  st(r.ReverseStats),
		ProxySnatIp:   b(r.ProxySNATAddress),
		ProxySnatPort: uint32(r.ProxySNATPort),
	}
	if r.TCPState != "" {
		f.Transport.Protocol = &pb.Transport_Tcp{Tcp: &pb.TCP{StateName: r.TCPState}}
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
