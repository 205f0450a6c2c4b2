package flowstreamexporter

import (
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// toFlow converts a record to its wire form (Antrea's Flow message).
func toFlow(r *flowrecord.Record, src, dst tier) *pb.Flow {
	f := &pb.Flow{
		Id:        r.Key,
		StartTs:   ts(r.Start),
		EndTs:     ts(r.End),
		EndReason: pb.FlowEndReason(r.EndReason),
		Ip: &pb.IP{
			Version:     ipVersion(r.Source.Address),
			Source:      addrBytes(r.Source.Address),
			Destination: addrBytes(r.Destination.Address),
		},
		Transport: &pb.Transport{
			ProtocolNumber:  uint32(r.Protocol),
			SourcePort:      uint32(r.Source.Port),
			DestinationPort: uint32(r.Destination.Port),
		},
		K8S: &pb.Kubernetes{
			FlowType:                       pb.FlowType(r.FlowType),
			SourcePodNamespace:             r.Source.Namespace,
			SourcePodName:                  r.Source.PodName,
			SourcePodUid:                   r.Source.PodUID,
			SourcePodLabels:                podLabels(r.Source.PodLabels),
			SourceNodeName:                 r.Source.NodeName,
			SourceNodeUid:                  r.Source.NodeUID,
			DestinationPodNamespace:        r.Destination.Namespace,
			DestinationPodName:             r.Destination.PodName,
			DestinationPodUid:              r.Destination.PodUID,
			DestinationPodLabels:           podLabels(r.Destination.PodLabels),
			DestinationNodeName:            r.Destination.NodeName,
			DestinationNodeUid:             r.Destination.NodeUID,
			DestinationClusterIp:           addrBytes(r.Service.Address),
			DestinationServicePort:         uint32(r.Service.Port),
			DestinationServicePortName:     r.Service.PortName,
			DestinationServiceUid:          r.Service.UID,
			DestinationServiceIp:           addrBytes(r.Service.Address),
			IngressNetworkPolicyType:       pb.NetworkPolicyType(r.IngressPolicy.Type),
			IngressNetworkPolicyNamespace:  r.IngressPolicy.Namespace,
			IngressNetworkPolicyName:       r.IngressPolicy.Name,
			IngressNetworkPolicyUid:        r.IngressPolicy.UID,
			IngressNetworkPolicyRuleName:   r.IngressPolicy.RuleName,
			IngressNetworkPolicyRuleAction: pb.NetworkPolicyRuleAction(r.IngressPolicy.RuleAction),
			EgressNetworkPolicyType:        pb.NetworkPolicyType(r.EgressPolicy.Type),
			EgressNetworkPolicyNamespace:   r.EgressPolicy.Namespace,
			EgressNetworkPolicyName:        r.EgressPolicy.Name,
			EgressNetworkPolicyUid:         r.EgressPolicy.UID,
			EgressNetworkPolicyRuleName:    r.EgressPolicy.RuleName,
			EgressNetworkPolicyRuleAction:  pb.NetworkPolicyRuleAction(r.EgressPolicy.RuleAction),
			EgressName:                     r.Egress.Name,
			EgressIp:                       addrBytes(r.Egress.Address),
			EgressNodeName:                 r.Egress.NodeName,
			EgressNodeUid:                  r.Egress.NodeUID,
			EgressUid:                      r.Egress.UID,
			SourceDisclosure:               pb.EndpointDisclosure(src),
			DestinationDisclosure:          pb.EndpointDisclosure(dst),
		},
		Stats:         stats(r.Stats),
		ReverseStats:  stats(r.ReverseStats),
		FlowDirection: pb.FlowDirection(r.Direction.IPFIX()),
		ProxySnatIp:   addrBytes(r.ProxySNATAddress),
		ProxySnatPort: uint32(r.ProxySNATPort),
	}
	if r.TCPState != "" {
		f.Transport.Protocol = &pb.Transport_Tcp{Tcp: &pb.TCP{StateName: r.TCPState}}
	}
	// The IPFIX block names the exporting Node: only on a record whose two
	// endpoints are both disclosed in full.
	if src == tierFull && dst == tierFull {
		f.Ipfix = &pb.IPFIX{ExportTime: ts(r.Observed), ObservationDomainId: r.Origin.ObservationDomainID}
		if r.Origin.ExporterAddress.IsValid() {
			f.Ipfix.ExporterIp = r.Origin.ExporterAddress.String()
		}
	}
	if a := r.Aggregation; a != nil {
		f.Aggregation = &pb.Aggregation{
			EndTsFromSource:                  ts(a.EndFromSource),
			EndTsFromDestination:             ts(a.EndFromDestination),
			StatsFromSource:                  stats(a.StatsFromSource),
			ReverseStatsFromSource:           stats(a.ReverseStatsFromSource),
			StatsFromDestination:             stats(a.StatsFromDestination),
			ReverseStatsFromDestination:      stats(a.ReverseStatsFromDestination),
			ThroughputFromSource:             a.ThroughputFromSource,
			ReverseThroughputFromSource:      a.ReverseThroughputFromSource,
			ThroughputFromDestination:        a.ThroughputFromDestination,
			ReverseThroughputFromDestination: a.ReverseThroughputFromDestination,
			Throughput:                       a.Throughput,
			ReverseThroughput:                a.ReverseThroughput,
		}
	}
	return f
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func stats(c flowrecord.Counters) *pb.Stats {
	return &pb.Stats{PacketTotalCount: c.PacketTotal, PacketDeltaCount: c.PacketDelta, OctetTotalCount: c.OctetTotal, OctetDeltaCount: c.OctetDelta}
}

func podLabels(m map[string]string) *pb.Labels {
	if m == nil {
		return nil
	}
	return &pb.Labels{Labels: m}
}

func ipVersion(a netip.Addr) pb.IPVersion {
	switch {
	case !a.IsValid():
		return pb.IPVersion_IP_VERSION_UNSPECIFIED
	case a.Is4() || a.Is4In6():
		return pb.IPVersion_IP_VERSION_4
	default:
		return pb.IPVersion_IP_VERSION_6
	}
}

// addrBytes is the address in 4 or 16 bytes, nil when unset.
func addrBytes(a netip.Addr) []byte {
	if !a.IsValid() {
		return nil
	}
	return a.Unmap().AsSlice()
}
