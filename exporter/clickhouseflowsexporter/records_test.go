//go:build integration

package clickhouseflowsexporter

import (
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// The five kinds of records the table must hold. Each has a distinct source
// port so a test can find its row.

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// intraNodeRecord: Pod → Pod on one Node through a ClusterIP Service, both
// policies set, aggregated by the gateway.
func intraNodeRecord() *flowrecord.Record {
	return &flowrecord.Record{
		Start: t0, End: t0.Add(10 * time.Second), Observed: t0.Add(11 * time.Second),
		Protocol: 6,
		Source: flowrecord.Endpoint{Address: ip("10.10.0.5"), Port: 41001, Kind: flowrecord.EndpointPod,
			Namespace: "shop", PodName: "web-7d9f-abcde", PodUID: "uid-pod-web", PodLabels: map[string]string{"app": "web", "tier": "front"},
			WorkloadKind: "Deployment", WorkloadName: "web", NodeName: "node-a", NodeUID: "uid-node-a"},
		Destination: flowrecord.Endpoint{Address: ip("10.10.0.9"), Port: 8080, Kind: flowrecord.EndpointPod,
			Namespace: "shop", PodName: "api-0", PodUID: "uid-pod-api", PodLabels: map[string]string{},
			WorkloadKind: "StatefulSet", WorkloadName: "api", NodeName: "node-a", NodeUID: "uid-node-a"},
		OriginalDestinationAddress: ip("10.96.0.20"), OriginalDestinationPort: 80,
		Stats:        flowrecord.Counters{PacketTotal: 12, OctetTotal: 3400, PacketDelta: 2, OctetDelta: 400},
		ReverseStats: flowrecord.Counters{PacketTotal: 10, OctetTotal: 90000, PacketDelta: 1, OctetDelta: 1500},
		EndReason:    flowrecord.EndReasonActiveTimeout, TCPState: "ESTABLISHED", FlowType: flowrecord.FlowTypeIntraNode,
		Service: flowrecord.Service{PortName: "shop/api:http", UID: "uid-svc-api", Address: ip("10.96.0.20"), Port: 80},
		IngressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "shop", Name: "allow-web",
			RuleName: "ingress-0", RuleAction: flowrecord.RuleActionAllow},
		EgressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaClusterNetworkPolicy, Name: "acnp-egress",
			RuleName: "rule-2", RuleAction: flowrecord.RuleActionAllow},
		Reporter:    flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideBoth},
		Correlation: flowrecord.CorrelationNotRequired,
		Aggregation: &flowrecord.Aggregation{
			EndFromSource: t0.Add(10 * time.Second), EndFromDestination: t0.Add(10 * time.Second),
			Throughput: 320, ReverseThroughput: 1200, ThroughputFromSource: 320, ThroughputFromDestination: 321,
			ReverseThroughputFromSource: 1200, ReverseThroughputFromDestination: 1201,
		},
	}
}

// interNodePairedRecord: both halves merged by the gateway.
func interNodePairedRecord() *flowrecord.Record {
	return &flowrecord.Record{
		Start: t0.Add(time.Second), End: t0.Add(20 * time.Second), Observed: t0.Add(21 * time.Second),
		Protocol: 17,
		Source: flowrecord.Endpoint{Address: ip("10.10.0.6"), Port: 41002, Kind: flowrecord.EndpointPod,
			Namespace: "dns-clients", PodName: "client-1", PodUID: "uid-pod-client", PodLabels: map[string]string{"app": "client"},
			WorkloadKind: "DaemonSet", WorkloadName: "client", NodeName: "node-a", NodeUID: "uid-node-a"},
		Destination: flowrecord.Endpoint{Address: ip("10.10.1.7"), Port: 53, Kind: flowrecord.EndpointPod,
			Namespace: "kube-system", PodName: "coredns-abc", PodUID: "uid-pod-dns", PodLabels: map[string]string{"k8s-app": "kube-dns"},
			WorkloadKind: "Deployment", WorkloadName: "coredns", NodeName: "node-b", NodeUID: "uid-node-b"},
		OriginalDestinationAddress: ip("10.96.0.10"), OriginalDestinationPort: 53,
		Stats:        flowrecord.Counters{PacketTotal: 4, OctetTotal: 320, PacketDelta: 4, OctetDelta: 320},
		ReverseStats: flowrecord.Counters{PacketTotal: 4, OctetTotal: 640, PacketDelta: 4, OctetDelta: 640},
		EndReason:    flowrecord.EndReasonIdleTimeout, FlowType: flowrecord.FlowTypeInterNode,
		Service:     flowrecord.Service{PortName: "kube-system/kube-dns:dns", UID: "uid-svc-dns", Address: ip("10.96.0.10"), Port: 53},
		Reporter:    flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination},
		Correlation: flowrecord.CorrelationPaired,
		Aggregation: &flowrecord.Aggregation{
			EndFromSource: t0.Add(19 * time.Second), EndFromDestination: t0.Add(20 * time.Second),
			StatsFromSource:      flowrecord.Counters{PacketTotal: 4, OctetTotal: 320},
			StatsFromDestination: flowrecord.Counters{PacketTotal: 4, OctetTotal: 320},
			Throughput:           134, ReverseThroughput: 268, ThroughputFromSource: 135, ThroughputFromDestination: 134,
			ReverseThroughputFromSource: 269, ReverseThroughputFromDestination: 268,
		},
	}
}

// interNodeUnpairedRecord: the Antrea #8260 case, a hostNetwork client (the Node
// itself) to a remote Pod, whose destination half never arrived. Not aggregated.
func interNodeUnpairedRecord() *flowrecord.Record {
	return &flowrecord.Record{
		Start: t0.Add(2 * time.Second), End: t0.Add(30 * time.Second), Observed: t0.Add(31 * time.Second),
		Protocol: 6,
		Source: flowrecord.Endpoint{Address: ip("10.10.0.1"), Port: 41003, Kind: flowrecord.EndpointNode,
			NodeName: "node-a", NodeUID: "uid-node-a"},
		Destination: flowrecord.Endpoint{Address: ip("10.10.1.8"), Port: 9100, Kind: flowrecord.EndpointPod,
			Namespace: "monitoring", PodName: "exporter-x", NodeName: "node-b"},
		OriginalDestinationAddress: ip("10.10.1.8"), OriginalDestinationPort: 9100,
		Stats:        flowrecord.Counters{PacketTotal: 7, OctetTotal: 700, PacketDelta: 7, OctetDelta: 700},
		ReverseStats: flowrecord.Counters{PacketTotal: 6, OctetTotal: 6000, PacketDelta: 6, OctetDelta: 6000},
		EndReason:    flowrecord.EndReasonEndOfFlow, TCPState: "TIME_WAIT", FlowType: flowrecord.FlowTypeInterNode,
		Reporter:    flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource},
		Correlation: flowrecord.CorrelationUnpaired,
	}
}

// toExternalRecord: Pod → Internet through an Antrea Egress, IPv6.
func toExternalRecord() *flowrecord.Record {
	return &flowrecord.Record{
		Start: t0.Add(3 * time.Second), End: t0.Add(40 * time.Second), Observed: t0.Add(41 * time.Second),
		Protocol: 6,
		Source: flowrecord.Endpoint{Address: ip("fd00:10::5"), Port: 41004, Kind: flowrecord.EndpointPod,
			Namespace: "shop", PodName: "checkout-1", PodUID: "uid-pod-checkout",
			WorkloadKind: "Deployment", WorkloadName: "checkout", NodeName: "node-c", NodeUID: "uid-node-c"},
		Destination:                flowrecord.Endpoint{Address: ip("2001:db8::443"), Port: 443, Kind: flowrecord.EndpointExternal},
		OriginalDestinationAddress: ip("2001:db8::443"), OriginalDestinationPort: 443,
		Stats:        flowrecord.Counters{PacketTotal: 30, OctetTotal: 4000, PacketDelta: 5, OctetDelta: 500},
		ReverseStats: flowrecord.Counters{PacketTotal: 40, OctetTotal: 50000, PacketDelta: 8, OctetDelta: 9000},
		EndReason:    flowrecord.EndReasonActiveTimeout, TCPState: "ESTABLISHED", FlowType: flowrecord.FlowTypeToExternal,
		EgressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: "shop", Name: "to-payments",
			RuleName: "allow-443", RuleAction: flowrecord.RuleActionAllow},
		Egress:      flowrecord.Egress{Name: "egress-shop", Address: ip("192.0.2.10"), NodeName: "node-d"},
		Reporter:    flowrecord.Reporter{NodeName: "node-c", Side: flowrecord.SideSource},
		Correlation: flowrecord.CorrelationNotRequired,
	}
}

// fromExternalRecord: Internet → NodePort → Pod on another Node, SNATed on
// the ingress Node, aggregated.
func fromExternalRecord() *flowrecord.Record {
	return &flowrecord.Record{
		Start: t0.Add(4 * time.Second), End: t0.Add(50 * time.Second), Observed: t0.Add(51 * time.Second),
		Protocol: 6,
		Source:   flowrecord.Endpoint{Address: ip("198.51.100.7"), Port: 41005, Kind: flowrecord.EndpointExternal},
		Destination: flowrecord.Endpoint{Address: ip("10.10.1.9"), Port: 8443, Kind: flowrecord.EndpointPod,
			Namespace: "shop", PodName: "gateway-2", PodUID: "uid-pod-gw", PodLabels: map[string]string{"app": "gateway"},
			WorkloadKind: "Deployment", WorkloadName: "gateway", NodeName: "node-b", NodeUID: "uid-node-b"},
		OriginalDestinationAddress: ip("172.18.0.2"), OriginalDestinationPort: 30443,
		Stats:        flowrecord.Counters{PacketTotal: 100, OctetTotal: 10000, PacketDelta: 10, OctetDelta: 1000},
		ReverseStats: flowrecord.Counters{PacketTotal: 90, OctetTotal: 900000, PacketDelta: 9, OctetDelta: 90000},
		EndReason:    flowrecord.EndReasonEndOfFlow, TCPState: "CLOSE", FlowType: flowrecord.FlowTypeFromExternal,
		Service:          flowrecord.Service{PortName: "shop/gateway:https", UID: "uid-svc-gw", Address: ip("172.18.0.2"), Port: 30443},
		ProxySNATAddress: ip("172.18.0.2"), ProxySNATPort: 61001,
		IngressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaClusterNetworkPolicy, Name: "deny-bad",
			RuleName: "drop-1", RuleAction: flowrecord.RuleActionDrop},
		Reporter:    flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination},
		Correlation: flowrecord.CorrelationPaired,
		Aggregation: &flowrecord.Aggregation{
			EndFromSource: t0.Add(49 * time.Second), EndFromDestination: t0.Add(50 * time.Second),
			Throughput: 8000, ReverseThroughput: 720000, ThroughputFromSource: 8001, ThroughputFromDestination: 8000,
			ReverseThroughputFromSource: 720001, ReverseThroughputFromDestination: 720000,
		},
	}
}
