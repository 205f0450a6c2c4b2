// Package demodata is a known set of flow records shaped like what `make demo`
// writes (the testbed scenario's Pods, Nodes, Services and external peers),
// plus a workload, a NetworkPolicy denial and an unpaired half, so every
// dashboard panel and the workload map have something predictable to show.
// The dashboards' and flowctl map's integration tests write it through the
// real clickhouse_flows exporter (Write).
package demodata

import (
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Namespace of every Pod in the set.
const Namespace = "default"

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// Endpoints of the set.
var (
	clientA = flowrecord.Endpoint{Address: ip("10.244.1.2"), Kind: flowrecord.EndpointPod, Namespace: Namespace,
		PodName: "client-a", PodUID: "uid-client-a", WorkloadKind: "Deployment", WorkloadName: "client",
		NodeName: "node-1", NodeUID: "uid-node-1"}
	webA = flowrecord.Endpoint{Address: ip("10.244.1.3"), Port: 8080, Kind: flowrecord.EndpointPod, Namespace: Namespace,
		PodName: "web-a", PodUID: "uid-web-a", NodeName: "node-1", NodeUID: "uid-node-1"}
	webB = flowrecord.Endpoint{Address: ip("10.244.2.2"), Port: 8080, Kind: flowrecord.EndpointPod, Namespace: Namespace,
		PodName: "web-b", PodUID: "uid-web-b", NodeName: "node-2", NodeUID: "uid-node-2"}
	webC = flowrecord.Endpoint{Address: ip("10.244.3.2"), Port: 8080, Kind: flowrecord.EndpointPod, Namespace: Namespace,
		PodName: "web-c", PodUID: "uid-web-c", WorkloadKind: "StatefulSet", WorkloadName: "web-far",
		NodeName: "node-3", NodeUID: "uid-node-3"}
	node1    = flowrecord.Endpoint{Address: ip("10.244.1.1"), Kind: flowrecord.EndpointNode, NodeName: "node-1", NodeUID: "uid-node-1"}
	node2    = flowrecord.Endpoint{Address: ip("172.18.0.12"), Port: 10250, Kind: flowrecord.EndpointNode, NodeName: "node-2", NodeUID: "uid-node-2"}
	outside  = flowrecord.Endpoint{Address: ip("192.0.2.80"), Port: 8080, Kind: flowrecord.EndpointExternal}
	visitor  = flowrecord.Endpoint{Address: ip("198.51.100.7"), Kind: flowrecord.EndpointExternal}
	remoteSv = flowrecord.Service{PortName: Namespace + "/web-remote:http", UID: "uid-web-remote", Address: ip("10.96.0.10"), Port: 80}
)

// The payload of every ordinary connection, both directions.
const (
	RequestBytes = 3000
	ReplyBytes   = 2000
)

// conn is one record: from → to, counters, flow type and correlation state.
func conn(end time.Time, sport uint16, from, to flowrecord.Endpoint, ft flowrecord.FlowType, cs flowrecord.CorrelationState) *flowrecord.Record {
	from.Port = sport
	return &flowrecord.Record{
		Start: end.Add(-5 * time.Second), End: end, Observed: end.Add(time.Second),
		Protocol: 6, Source: from, Destination: to,
		OriginalDestinationAddress: to.Address, OriginalDestinationPort: to.Port,
		Stats:        flowrecord.Counters{PacketTotal: 5, OctetTotal: RequestBytes, PacketDelta: 5, OctetDelta: RequestBytes},
		ReverseStats: flowrecord.Counters{PacketTotal: 4, OctetTotal: ReplyBytes, PacketDelta: 4, OctetDelta: ReplyBytes},
		EndReason:    flowrecord.EndReasonEndOfFlow, TCPState: "TIME_WAIT", FlowType: ft,
		Reporter: flowrecord.Reporter{NodeName: from.NodeName, Side: flowrecord.SideSource}, Correlation: cs,
	}
}

// Records returns the set, every record ending in the minute before end. Its
// known facts (asserted by the tests): 10 connections; client-a is the top
// talker; node-1 reaches web-a and web-b, web-b reaches node-2's kubelet;
// client-a → web-b:9 is refused; client-a → web-c:9000 is denied by
// NetworkPolicy default/deny-client; the client-a → web-c record is unpaired.
func Records(end time.Time) []*flowrecord.Record {
	at := func(i int) time.Time { return end.Add(-time.Duration(10+i*4) * time.Second) }
	var rs []*flowrecord.Record
	add := func(r *flowrecord.Record) { rs = append(rs, r) }

	add(conn(at(0), 41001, clientA, webA, flowrecord.FlowTypeIntraNode, flowrecord.CorrelationNotRequired))
	r := conn(at(1), 41004, clientA, webB, flowrecord.FlowTypeInterNode, flowrecord.CorrelationPaired)
	r.Service, r.OriginalDestinationAddress, r.OriginalDestinationPort = remoteSv, remoteSv.Address, remoteSv.Port
	add(r)
	add(conn(at(2), 41006, node1, webA, flowrecord.FlowTypeIntraNode, flowrecord.CorrelationNotRequired))
	add(conn(at(3), 41007, node1, webB, flowrecord.FlowTypeInterNode, flowrecord.CorrelationPaired))
	add(conn(at(4), 41009, clientA, outside, flowrecord.FlowTypeToExternal, flowrecord.CorrelationNotRequired))
	r = conn(at(5), 41010, visitor, webB, flowrecord.FlowTypeFromExternal, flowrecord.CorrelationNotRequired)
	r.Service = remoteSv
	r.OriginalDestinationAddress, r.OriginalDestinationPort = ip("172.18.0.12"), 30080
	add(r)
	// Pod → Node: web-b reaches its Node's kubelet.
	r = conn(at(6), 41030, webB, node2, flowrecord.FlowTypeIntraNode, flowrecord.CorrelationNotRequired)
	r.Stats.OctetDelta, r.Stats.OctetTotal, r.ReverseStats.OctetDelta, r.ReverseStats.OctetTotal = 500, 500, 700, 700
	add(r)
	// Refused: a SYN answered by RST, from a DESTROY event.
	closed := webB
	closed.Port = 9
	r = conn(at(7), 41020, clientA, closed, flowrecord.FlowTypeInterNode, flowrecord.CorrelationPaired)
	r.Stats = flowrecord.Counters{PacketTotal: 1, OctetTotal: 60, PacketDelta: 1, OctetDelta: 60}
	r.ReverseStats = flowrecord.Counters{PacketTotal: 1, OctetTotal: 40, PacketDelta: 1, OctetDelta: 40}
	r.TCPState = "CLOSE"
	add(r)
	// Unpaired: web-c's Node never sent its half.
	add(conn(at(8), 41015, clientA, webC, flowrecord.FlowTypeInterNode, flowrecord.CorrelationUnpaired))
	// Denied by an ingress NetworkPolicy: one SYN, no reply.
	denied := webC
	denied.Port = 9000
	r = conn(at(9), 41040, clientA, denied, flowrecord.FlowTypeInterNode, flowrecord.CorrelationPaired)
	r.Stats = flowrecord.Counters{PacketTotal: 1, OctetTotal: 60, PacketDelta: 1, OctetDelta: 60}
	r.ReverseStats = flowrecord.Counters{}
	r.TCPState = "SYN_SENT"
	r.EndReason = flowrecord.EndReasonIdleTimeout
	r.IngressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: Namespace, Name: "deny-client",
		RuleName: "default-deny", RuleAction: flowrecord.RuleActionDrop}
	add(r)
	return rs
}
