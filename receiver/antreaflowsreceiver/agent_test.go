package antreaflowsreceiver

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmware/go-ipfix/pkg/entities"
	ipfixexporter "github.com/vmware/go-ipfix/pkg/exporter"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/antreaagent"
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

// announce sends a template of the elements and returns its ID.
func (g *agent) announce(t testing.TB, elements []*entities.InfoElement) uint16 {
	t.Helper()
	tid, err := g.Announce(elements)
	require.NoError(t, err)
	return tid
}

// sendData sends one data set of template tid with one record.
func (g *agent) sendData(t testing.TB, tid uint16, ies []entities.InfoElementWithValue) {
	t.Helper()
	require.NoError(t, g.SendData(tid, ies))
}

// withValue is e carrying v, a value of e's Go type as agentValue gives it.
func withValue(e *entities.InfoElement, v any) entities.InfoElementWithValue {
	iev, err := antreaagent.WithValue(e, v)
	if err != nil {
		panic(err)
	}
	return iev
}

// fnv1 is the agent's observation domain: FNV-1 (not 1a) of its Node name.
func fnv1(s string) uint32 { return antreaagent.ObservationDomain(s) }

func (g *agent) send(t testing.TB, r *agentRecord) {
	t.Helper()
	v6 := r.Source.Address.Is6()
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
