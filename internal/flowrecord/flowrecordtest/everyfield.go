package flowrecordtest

import (
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// EveryField returns a record with every field set, times to the
// nanosecond, so a codec's round trip covers every field of the catalogue.
func EveryField() *flowrecord.Record {
	start := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	return &flowrecord.Record{
		Start:    start,
		End:      start.Add(9 * time.Second),
		Observed: start.Add(10 * time.Second),
		Protocol: 6,
		Source: flowrecord.Endpoint{
			Address: netip.MustParseAddr("10.10.0.5"), Port: 43512, Kind: flowrecord.EndpointPod,
			Namespace: "shop", PodName: "web-7d9f-abcde", PodUID: "0b6f7a4e-1111-4c3e-9d0a-6a1d2b3c4d5e",
			PodLabels: map[string]string{"app": "web", "tier": "front"}, WorkloadKind: "Deployment", WorkloadName: "web",
			NodeName: "node-a", NodeUID: "7e1c0000-0000-4000-8000-00000000000a",
		},
		Destination: flowrecord.Endpoint{
			Address: netip.MustParseAddr("10.10.1.7"), Port: 8080, Kind: flowrecord.EndpointPod,
			Namespace: "shop", PodName: "api-0", PodUID: "0b6f7a4e-2222-4c3e-9d0a-6a1d2b3c4d5e",
			PodLabels: map[string]string{}, WorkloadKind: "StatefulSet", WorkloadName: "api",
			NodeName: "node-b", NodeUID: "7e1c0000-0000-4000-8000-00000000000b",
		},
		OriginalDestinationAddress: netip.MustParseAddr("10.96.0.20"), OriginalDestinationPort: 80,
		Stats:        flowrecord.Counters{PacketTotal: 12, OctetTotal: 3400, PacketDelta: 2, OctetDelta: 400},
		ReverseStats: flowrecord.Counters{PacketTotal: 10, OctetTotal: 90000, PacketDelta: 1, OctetDelta: 1500},
		EndReason:    flowrecord.EndReasonActiveTimeout,
		TCPState:     "ESTABLISHED",
		ICMP:         flowrecord.ICMP{Type: 8, Code: 1, ID: 4660}, // not a TCP field: set so the round trip covers it
		FlowType:     flowrecord.FlowTypeInterNode,
		Service: flowrecord.Service{PortName: "shop/api:http", UID: "5e55c000-0000-4000-8000-000000000001",
			Address: netip.MustParseAddr("10.96.0.20"), Port: 80},
		ProxySNATAddress: netip.MustParseAddr("10.10.0.1"), ProxySNATPort: 61000,
		IngressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: "shop", Name: "allow-web", UID: "p-in",
			RuleName: "rule-1", RuleAction: flowrecord.RuleActionAllow},
		EgressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaClusterNetworkPolicy, Namespace: "shop", Name: "egress-all", UID: "p-out",
			RuleName: "rule-2", RuleAction: flowrecord.RuleActionReject},
		Egress: flowrecord.Egress{Name: "egress-1", UID: "e-1", Address: netip.MustParseAddr("192.0.2.10"), NodeName: "node-c", NodeUID: "n-c"},
		Conntrack: flowrecord.Conntrack{ID: 4242, Zone: 65520, Mark: 0x21,
			Labels: [16]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 9}},
		Reporter:    flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource},
		Direction:   flowrecord.DirectionEgress,
		Key:         "6|10.10.0.5:43512|10.10.1.7:8080",
		Correlation: flowrecord.CorrelationPaired,
		Evicted:     true,
		Aggregation: &flowrecord.Aggregation{
			EndFromSource:               start.Add(8 * time.Second),
			EndFromDestination:          start.Add(9 * time.Second),
			StatsFromSource:             flowrecord.Counters{PacketTotal: 12, OctetTotal: 3400, PacketDelta: 2, OctetDelta: 400},
			ReverseStatsFromSource:      flowrecord.Counters{PacketTotal: 10, OctetTotal: 90000, PacketDelta: 1, OctetDelta: 1500},
			StatsFromDestination:        flowrecord.Counters{PacketTotal: 11, OctetTotal: 3300, PacketDelta: 3, OctetDelta: 300},
			ReverseStatsFromDestination: flowrecord.Counters{PacketTotal: 9, OctetTotal: 88000, PacketDelta: 4, OctetDelta: 1400},
			Throughput:                  888, ReverseThroughput: 915,
			ThroughputFromSource: 1, ReverseThroughputFromSource: 2,
			ThroughputFromDestination: 3, ReverseThroughputFromDestination: 4,
		},
		Origin: flowrecord.Origin{ObservationDomainID: 0xdeadbeef, ExporterAddress: netip.MustParseAddr("fd00::1")},
	}
}

// NodeHalf is what a node collector typically emits: a Pod-to-Pod half with
// identities, Service and conntrack fields, no aggregation, labels or policies.
func NodeHalf() *flowrecord.Record {
	r := EveryField()
	r.Aggregation = nil
	r.Source.PodLabels, r.Destination.PodLabels = nil, nil
	r.IngressPolicy, r.EgressPolicy, r.Egress, r.Origin = flowrecord.Policy{}, flowrecord.Policy{}, flowrecord.Egress{}, flowrecord.Origin{}
	r.Direction, r.Correlation, r.Evicted = flowrecord.DirectionUnset, flowrecord.CorrelationNone, false
	return r
}
