package antreaflowsreceiver

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmware/go-ipfix/pkg/entities"
	ipfixexporter "github.com/vmware/go-ipfix/pkg/exporter"
	"github.com/vmware/go-ipfix/pkg/registry"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
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
