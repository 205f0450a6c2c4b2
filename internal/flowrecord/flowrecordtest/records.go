// Package flowrecordtest holds flow records for the wire tests of the
// exporters: a small set that sets every field the wire formats carry, in both
// address families, with and without the per-Node statistics of aggregate mode,
// and with the edge values (nil and empty labels, unset addresses, 4-in-6
// addresses, times out of the wire's range) the encoders must get right.
package flowrecordtest

import (
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Start is the connection start of the records.
var Start = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// Full returns a record with every field set to a distinct value, in the
// address family chosen by ipv6.
func Full(ipv6 bool) *flowrecord.Record {
	a := func(v4, v6 string) netip.Addr {
		if ipv6 {
			return netip.MustParseAddr(v6)
		}
		return netip.MustParseAddr(v4)
	}
	return &flowrecord.Record{
		Start: Start, End: Start.Add(9 * time.Second), Observed: Start.Add(10 * time.Second),
		Protocol: 6,
		Source: flowrecord.Endpoint{Address: a("10.10.0.5", "fd00:10::5"), Port: 43512, Kind: flowrecord.EndpointPod,
			Namespace: "shop", PodName: "web-7d9f-abcde", PodUID: "0b6f7a4e-1111-4c3e-9d0a-6a1d2b3c4d5e",
			PodLabels:    map[string]string{"app": "web", "tier": "front"},
			WorkloadKind: "Deployment", WorkloadName: "web",
			NodeName: "node-a", NodeUID: "7e1c0000-0000-4000-8000-00000000000a"},
		Destination: flowrecord.Endpoint{Address: a("10.10.1.7", "fd00:10:1::7"), Port: 8080, Kind: flowrecord.EndpointPod,
			Namespace: "shop-db", PodName: "api-0", PodUID: "0b6f7a4e-2222-4c3e-9d0a-6a1d2b3c4d5e",
			PodLabels: map[string]string{}, WorkloadKind: "StatefulSet", WorkloadName: "api",
			NodeName: "node-b", NodeUID: "7e1c0000-0000-4000-8000-00000000000b"},
		OriginalDestinationAddress: a("10.96.0.20", "fd00:96::20"), OriginalDestinationPort: 80,
		Stats:        flowrecord.Counters{PacketTotal: 12, OctetTotal: 3400, PacketDelta: 2, OctetDelta: 400},
		ReverseStats: flowrecord.Counters{PacketTotal: 10, OctetTotal: 90000, PacketDelta: 1, OctetDelta: 1500},
		EndReason:    flowrecord.EndReasonActiveTimeout, TCPState: "ESTABLISHED", FlowType: flowrecord.FlowTypeInterNode,
		ICMP: flowrecord.ICMP{Type: 8, Code: 1, ID: 4660},
		Service: flowrecord.Service{PortName: "shop/api:http", UID: "5e55c000-0000-4000-8000-000000000001",
			Address: a("10.96.0.20", "fd00:96::20"), Port: 80},
		ProxySNATAddress: a("10.10.0.1", "fd00:10::1"), ProxySNATPort: 61000,
		IngressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: "shop", Name: "allow-web",
			UID: "9a000000-0000-4000-8000-0000000000a1", RuleName: "rule-1", RuleAction: flowrecord.RuleActionAllow},
		EgressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaClusterNetworkPolicy, Name: "egress-all",
			UID: "9a000000-0000-4000-8000-0000000000a2", RuleName: "rule-2", RuleAction: flowrecord.RuleActionReject},
		Egress: flowrecord.Egress{Name: "egress-1", UID: "e9000000-0000-4000-8000-000000000001", Address: a("192.0.2.10", "2001:db8::10"),
			NodeName: "node-c", NodeUID: "7e1c0000-0000-4000-8000-00000000000c"},
		Conntrack:   flowrecord.Conntrack{ID: 4242, Zone: 7, Mark: 0x21, Labels: [16]byte{15: 9}},
		Reporter:    flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource},
		Direction:   flowrecord.DirectionEgress,
		Key:         "6|10.10.0.5:43512|10.10.1.7:8080",
		Correlation: flowrecord.CorrelationPaired,
		Aggregation: &flowrecord.Aggregation{
			EndFromSource: Start.Add(8 * time.Second), EndFromDestination: Start.Add(7 * time.Second),
			StatsFromSource:             flowrecord.Counters{PacketTotal: 21, OctetTotal: 22, PacketDelta: 23, OctetDelta: 24},
			ReverseStatsFromSource:      flowrecord.Counters{PacketTotal: 31, OctetTotal: 32, PacketDelta: 33, OctetDelta: 34},
			StatsFromDestination:        flowrecord.Counters{PacketTotal: 41, OctetTotal: 42, PacketDelta: 43, OctetDelta: 44},
			ReverseStatsFromDestination: flowrecord.Counters{PacketTotal: 51, OctetTotal: 52, PacketDelta: 53, OctetDelta: 54},
			Throughput:                  61, ReverseThroughput: 62, ThroughputFromSource: 63, ReverseThroughputFromSource: 64,
			ThroughputFromDestination: 65, ReverseThroughputFromDestination: 66,
		},
		Origin: flowrecord.Origin{ObservationDomainID: 0xdeadbeef, ExporterAddress: a("172.18.0.3", "fd00:18::3")},
	}
}

// Records returns the wire test records: Full in both families, a node
// record without aggregation (reported by the destination Node, labels not
// collected, no Service, Egress or SNAT), a record whose addresses are 4-in-6
// and whose times lie outside the 32-bit seconds range (and labels need
// escaping in JSON), an external one with
// the proxy exporter of the other family, one with only the 5-tuple, and one whose
// Service address is not of its source's family.
func Records() []*flowrecord.Record {
	node := Full(false)
	node.Aggregation = nil
	node.Source.PodLabels, node.Destination.PodLabels = nil, nil
	node.Service, node.Egress = flowrecord.Service{}, flowrecord.Egress{}
	node.ProxySNATAddress, node.ProxySNATPort = netip.Addr{}, 0
	node.Reporter.Side = flowrecord.SideDestination
	node.Start = node.Start.Add(999999999) // seconds truncate
	node.Correlation, node.Direction = flowrecord.CorrelationUnpaired, flowrecord.DirectionIngress

	mapped := Full(false)
	mapped.Source.PodLabels = map[string]string{"app": "web", "x": "<a&b>\"é\"\t"}
	mapped.Egress.Address = netip.MustParseAddr("::ffff:192.0.2.11")
	mapped.OriginalDestinationAddress = netip.MustParseAddr("::ffff:10.96.0.21")
	mapped.Start = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	mapped.End = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	mapped.Aggregation.EndFromSource = time.Time{}
	mapped.Reporter.Side = flowrecord.SideBoth
	mapped.Direction = flowrecord.DirectionUnknown

	external := Full(true)
	external.Destination = flowrecord.Endpoint{Address: netip.MustParseAddr("2001:db8::99"), Port: 443, Kind: flowrecord.EndpointExternal}
	external.FlowType = flowrecord.FlowTypeToExternal
	external.Origin.ExporterAddress = netip.MustParseAddr("172.18.0.4")
	external.Aggregation = nil
	external.Reporter.Side = flowrecord.SideBoth
	external.Source.PodUID = "not-a-uuid"

	bare := &flowrecord.Record{Protocol: 17,
		Source:      flowrecord.Endpoint{Address: netip.MustParseAddr("192.0.2.1"), Port: 5353},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("192.0.2.2"), Port: 53}}
	// mixed cannot be IPFIX-encoded: its Service address is not of its source's family.
	mixed := Full(false)
	mixed.Service.Address = netip.MustParseAddr("fd00:96::21")
	return []*flowrecord.Record{Full(false), Full(true), node, mapped, external, bare, mixed}
}
