package ipfixexporter

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

const testClusterUUID = "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9"

// fullRecord has every field set, so each IE carries a distinct, non-zero value.
func fullRecord(ipv6 bool) *flowrecord.Record { return flowrecordtest.Full(ipv6) }

// logsOf encodes records under one resource carrying the cluster UID.
func logsOf(recs ...*flowrecord.Record) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("k8s.cluster.uid", testClusterUUID)
	sl := rl.ScopeLogs().AppendEmpty()
	for _, r := range recs {
		attrcodec.Encode(r, sl.LogRecords().AppendEmpty())
	}
	return ld
}

// expected renders, as the go-ipfix collector prints it, the value each IE
// must carry for r. It is written from Antrea's documented semantics, not from
// the exporter's encoder.
func expected(r *flowrecord.Record, clusterID string) map[string]string {
	ip := func(a netip.Addr, v6 bool) string {
		if !a.IsValid() {
			if v6 {
				return "::"
			}
			return "0.0.0.0"
		}
		return a.String()
	}
	uuid := func(s string) string {
		if s == "" {
			return strings.Repeat("0", 32)
		}
		return strings.ReplaceAll(s, "-", "")
	}
	labels := func(m map[string]string) string {
		if m == nil {
			return ""
		}
		if len(m) == 0 {
			return "{}"
		}
		var parts []string
		for _, k := range sortedKeys(m) {
			parts = append(parts, fmt.Sprintf("%q:%q", k, m[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	agg := r.Aggregation
	if agg == nil {
		agg = &flowrecord.Aggregation{}
	}
	secs := func(t time.Time) string {
		if t.IsZero() {
			return "0"
		}
		return fmt.Sprint(t.Unix())
	}
	egressIP := ""
	if r.Egress.Address.IsValid() {
		egressIP = r.Egress.Address.String()
	}
	origin4, origin6 := "0.0.0.0", "::"
	if a := r.Origin.ExporterAddress; a.IsValid() {
		if a.Is4() {
			origin4 = a.String()
		} else {
			origin6 = a.String()
		}
	}
	d := func(v uint64) string { return fmt.Sprint(v) }
	m := map[string]string{
		"flowStartSeconds": secs(r.Start), "flowEndSeconds": secs(r.End), "flowEndReason": d(uint64(r.EndReason)),
		"sourceTransportPort": d(uint64(r.Source.Port)), "destinationTransportPort": d(uint64(r.Destination.Port)),
		"protocolIdentifier": d(uint64(r.Protocol)),
		"packetTotalCount":   d(r.Stats.PacketTotal), "octetTotalCount": d(r.Stats.OctetTotal),
		"packetDeltaCount": d(r.Stats.PacketDelta), "octetDeltaCount": d(r.Stats.OctetDelta),
		"sourceIPv4Address": ip(r.Source.Address, false), "destinationIPv4Address": ip(r.Destination.Address, false),
		"sourceIPv6Address": ip(r.Source.Address, true), "destinationIPv6Address": ip(r.Destination.Address, true),
		"reversePacketTotalCount": d(r.ReverseStats.PacketTotal), "reverseOctetTotalCount": d(r.ReverseStats.OctetTotal),
		"reversePacketDeltaCount": d(r.ReverseStats.PacketDelta), "reverseOctetDeltaCount": d(r.ReverseStats.OctetDelta),
		"sourcePodName": r.Source.PodName, "sourcePodNamespace": r.Source.Namespace, "sourceNodeName": r.Source.NodeName,
		"destinationPodName": r.Destination.PodName, "destinationPodNamespace": r.Destination.Namespace,
		"destinationNodeName": r.Destination.NodeName,
		"sourcePodUUID":       uuid(r.Source.PodUID), "sourceNodeUUID": uuid(r.Source.NodeUID),
		"destinationPodUUID": uuid(r.Destination.PodUID), "destinationNodeUUID": uuid(r.Destination.NodeUID),
		"destinationServicePort": d(uint64(r.Service.Port)), "destinationServicePortName": r.Service.PortName,
		"destinationServiceUUID":   uuid(r.Service.UID),
		"ingressNetworkPolicyName": r.IngressPolicy.Name, "ingressNetworkPolicyNamespace": r.IngressPolicy.Namespace,
		"ingressNetworkPolicyUUID": uuid(r.IngressPolicy.UID), "ingressNetworkPolicyType": d(uint64(r.IngressPolicy.Type)),
		"ingressNetworkPolicyRuleName": r.IngressPolicy.RuleName, "ingressNetworkPolicyRuleAction": d(uint64(r.IngressPolicy.RuleAction)),
		"egressNetworkPolicyName": r.EgressPolicy.Name, "egressNetworkPolicyNamespace": r.EgressPolicy.Namespace,
		"egressNetworkPolicyUUID": uuid(r.EgressPolicy.UID), "egressNetworkPolicyType": d(uint64(r.EgressPolicy.Type)),
		"egressNetworkPolicyRuleName": r.EgressPolicy.RuleName, "egressNetworkPolicyRuleAction": d(uint64(r.EgressPolicy.RuleAction)),
		"tcpState": r.TCPState, "flowType": d(uint64(r.FlowType)),
		"egressName": r.Egress.Name, "egressUUID": uuid(r.Egress.UID), "egressIP": egressIP,
		"egressNodeName": r.Egress.NodeName, "egressNodeUUID": uuid(r.Egress.NodeUID),
		"proxySnatPort": d(uint64(r.ProxySNATPort)),
		"proxySnatIPv4": ip(r.ProxySNATAddress, false), "proxySnatIPv6": ip(r.ProxySNATAddress, true),
		"destinationClusterIPv4": ip(r.Service.Address, false), "destinationClusterIPv6": ip(r.Service.Address, true),
		"destinationServiceIPv4": ip(r.Service.Address, false), "destinationServiceIPv6": ip(r.Service.Address, true),

		"packetTotalCountFromSourceNode": d(agg.StatsFromSource.PacketTotal), "octetTotalCountFromSourceNode": d(agg.StatsFromSource.OctetTotal),
		"packetDeltaCountFromSourceNode": d(agg.StatsFromSource.PacketDelta), "octetDeltaCountFromSourceNode": d(agg.StatsFromSource.OctetDelta),
		"reversePacketTotalCountFromSourceNode": d(agg.ReverseStatsFromSource.PacketTotal), "reverseOctetTotalCountFromSourceNode": d(agg.ReverseStatsFromSource.OctetTotal),
		"reversePacketDeltaCountFromSourceNode": d(agg.ReverseStatsFromSource.PacketDelta), "reverseOctetDeltaCountFromSourceNode": d(agg.ReverseStatsFromSource.OctetDelta),
		"packetTotalCountFromDestinationNode": d(agg.StatsFromDestination.PacketTotal), "octetTotalCountFromDestinationNode": d(agg.StatsFromDestination.OctetTotal),
		"packetDeltaCountFromDestinationNode": d(agg.StatsFromDestination.PacketDelta), "octetDeltaCountFromDestinationNode": d(agg.StatsFromDestination.OctetDelta),
		"reversePacketTotalCountFromDestinationNode": d(agg.ReverseStatsFromDestination.PacketTotal), "reverseOctetTotalCountFromDestinationNode": d(agg.ReverseStatsFromDestination.OctetTotal),
		"reversePacketDeltaCountFromDestinationNode": d(agg.ReverseStatsFromDestination.PacketDelta), "reverseOctetDeltaCountFromDestinationNode": d(agg.ReverseStatsFromDestination.OctetDelta),
		"flowEndSecondsFromSourceNode": secs(agg.EndFromSource), "flowEndSecondsFromDestinationNode": secs(agg.EndFromDestination),
		"throughput": d(agg.Throughput), "reverseThroughput": d(agg.ReverseThroughput),
		"throughputFromSourceNode": d(agg.ThroughputFromSource), "reverseThroughputFromSourceNode": d(agg.ReverseThroughputFromSource),
		"throughputFromDestinationNode": d(agg.ThroughputFromDestination), "reverseThroughputFromDestinationNode": d(agg.ReverseThroughputFromDestination),
		"sourcePodLabels": labels(r.Source.PodLabels), "destinationPodLabels": labels(r.Destination.PodLabels),
		"clusterId":                   clusterID,
		"originalObservationDomainId": d(uint64(r.Origin.ObservationDomainID)),
		"originalExporterIPv4Address": origin4, "originalExporterIPv6Address": origin6,
		"flowDirection": d(uint64(r.Direction.IPFIX())),
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
