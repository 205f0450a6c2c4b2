package antreaflowsreceiver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// The connections of the tests, as the agents of the two Nodes report them.
var (
	t0      = time.Unix(1_790_000_000, 0).UTC()
	podA    = netip.MustParseAddr("10.10.0.5")
	podB    = netip.MustParseAddr("10.10.1.7")
	podC    = netip.MustParseAddr("10.10.0.9")
	cluster = netip.MustParseAddr("10.96.0.10")
	nodeA   = netip.MustParseAddr("192.168.77.11")
	nodeB   = netip.MustParseAddr("192.168.77.12")
	gwB     = netip.MustParseAddr("10.10.1.1")
	client  = netip.MustParseAddr("203.0.113.50")
	egressX = netip.MustParseAddr("192.168.77.200")
)

// interNodeHalves: Pod a on node-a calls Service default/web (ClusterIP,
// DNATed on node-a) whose endpoint is Pod web on node-b; an Antrea
// ClusterNetworkPolicy admits it on egress, an Antrea NetworkPolicy on ingress.
func interNodeHalves(srcPort uint16) (src, dst agentRecord) {
	common := agentRecord{Record: flowrecord.Record{
		Start: t0, End: t0.Add(5 * time.Second), Observed: t0.Add(6 * time.Second), EndReason: flowrecord.EndReasonActiveTimeout,
		FlowType: flowrecord.FlowTypeInterNode, Protocol: 6, TCPState: "ESTABLISHED",
		Source: flowrecord.Endpoint{Address: podA, Port: srcPort}, Destination: flowrecord.Endpoint{Address: podB, Port: 8080},
		Stats:        flowrecord.Counters{PacketTotal: 10, OctetTotal: 1000, PacketDelta: 10, OctetDelta: 1000},
		ReverseStats: flowrecord.Counters{PacketTotal: 8, OctetTotal: 4000, PacketDelta: 8, OctetDelta: 4000},
	}}
	src, dst = common, common
	src.Source = flowrecord.Endpoint{Address: podA, Port: srcPort, Namespace: "default", PodName: "a", NodeName: "node-a"}
	src.Service = flowrecord.Service{Address: cluster, Port: 80, PortName: "default/web:http"}
	src.EgressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaClusterNetworkPolicy, Name: "acnp-allow-web",
		RuleName: "allow-to-web", RuleAction: flowrecord.RuleActionAllow}
	dst.Destination = flowrecord.Endpoint{Address: podB, Port: 8080, Namespace: "default", PodName: "web", NodeName: "node-b"}
	dst.IngressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: "default", Name: "anp-web",
		RuleName: "from-a", RuleAction: flowrecord.RuleActionAllow}
	return src, dst
}

// intraNode: Pod a calls Pod c on the same Node (node-a): one record, both halves.
func intraNode() agentRecord {
	return agentRecord{Record: flowrecord.Record{
		Start: t0, End: t0.Add(3 * time.Second), Observed: t0.Add(4 * time.Second), EndReason: flowrecord.EndReasonEndOfFlow,
		FlowType: flowrecord.FlowTypeIntraNode, Protocol: 17,
		Source:      flowrecord.Endpoint{Address: podA, Port: 5353, Namespace: "default", PodName: "a", NodeName: "node-a"},
		Destination: flowrecord.Endpoint{Address: podC, Port: 53, Namespace: "kube-system", PodName: "dns", NodeName: "node-a"},
		Stats:       flowrecord.Counters{PacketTotal: 2, OctetTotal: 120, PacketDelta: 2, OctetDelta: 120},
	}}
}

// nodePortHalves: an external client calls node-b's NodePort 30080 and
// node-b forwards to Pod c on node-a, SNATed to node-b's gateway address
// (Antrea's ingress-Node half, which names no Node); node-a reports the
// destination half as inter-Node from node-b's gateway.
func nodePortHalves() (ingress, dst agentRecord) {
	ingress = agentRecord{Record: flowrecord.Record{
		Start: t0, End: t0.Add(2 * time.Second), Observed: t0.Add(2 * time.Second), EndReason: flowrecord.EndReasonActiveTimeout,
		FlowType: flowrecord.FlowTypeFromExternal, Protocol: 6, TCPState: "ESTABLISHED",
		Source:           flowrecord.Endpoint{Address: client, Port: 40000},
		Destination:      flowrecord.Endpoint{Address: podC, Port: 8080},
		Stats:            flowrecord.Counters{PacketTotal: 4, OctetTotal: 400, PacketDelta: 4, OctetDelta: 400},
		Service:          flowrecord.Service{Address: nodeB, Port: 30080, PortName: "default/web-np:http"},
		ProxySNATAddress: gwB, ProxySNATPort: 61000,
	}}
	dst = agentRecord{Record: flowrecord.Record{
		Start: t0, End: t0.Add(2 * time.Second), Observed: t0.Add(2 * time.Second), EndReason: flowrecord.EndReasonActiveTimeout,
		FlowType: flowrecord.FlowTypeInterNode, Protocol: 6, TCPState: "ESTABLISHED",
		Source:      flowrecord.Endpoint{Address: gwB, Port: 61000},
		Destination: flowrecord.Endpoint{Address: podC, Port: 8080, Namespace: "kube-system", PodName: "dns", NodeName: "node-a"},
		Stats:       flowrecord.Counters{PacketTotal: 4, OctetTotal: 400, PacketDelta: 4, OctetDelta: 400},
	}}
	return ingress, dst
}

// toExternal: Pod a reaches the Internet through Egress egress-x.
func toExternal() agentRecord {
	return agentRecord{Record: flowrecord.Record{
		Start: t0, End: t0.Add(time.Second), Observed: t0.Add(time.Second), EndReason: flowrecord.EndReasonIdleTimeout,
		FlowType: flowrecord.FlowTypeToExternal, Protocol: 6, TCPState: "TIME_WAIT",
		Source:      flowrecord.Endpoint{Address: podA, Port: 41000, Namespace: "default", PodName: "a", NodeName: "node-a"},
		Destination: flowrecord.Endpoint{Address: client, Port: 443},
		Stats:       flowrecord.Counters{PacketTotal: 1, OctetTotal: 60, PacketDelta: 1, OctetDelta: 60},
		Egress:      flowrecord.Egress{Name: "egress-x", Address: egressX, NodeName: "node-b"},
	}}
}

// records decodes everything the sink holds, with the k8s.node.name of its
// resource (and its k8s.cluster.uid in ClusterUID).
func records(t testing.TB, batches []plog.Logs) (out []flowrecord.Record, nodes []string) {
	t.Helper()
	for _, l := range batches {
		for i := 0; i < l.ResourceLogs().Len(); i++ {
			rl := l.ResourceLogs().At(i)
			node, cluster := "", ""
			if v, ok := rl.Resource().Attributes().Get(catalogue.ResourceNodeName); ok {
				node = v.Str()
			}
			if v, ok := rl.Resource().Attributes().Get(catalogue.ResourceClusterUID); ok {
				cluster = v.Str()
			}
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				lrs := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					var r flowrecord.Record
					require.NoError(t, attrcodec.Decode(lrs.At(k), &r))
					r.ClusterUID = cluster // carried on the resource
					out = append(out, r)
					nodes = append(nodes, node)
				}
			}
		}
	}
	return out, nodes
}

// wantInterNodeSource is the half node-a's record of interNodeHalves becomes.
func wantInterNodeSource(srcPort uint16) flowrecord.Record {
	r := flowrecord.Record{
		Start: t0, End: t0.Add(5 * time.Second), Observed: t0.Add(6 * time.Second), Protocol: 6,
		Source:                     flowrecord.Endpoint{Address: podA, Port: srcPort, Kind: flowrecord.EndpointPod, Namespace: "default", PodName: "a", NodeName: "node-a"},
		Destination:                flowrecord.Endpoint{Address: podB, Port: 8080},
		OriginalDestinationAddress: cluster, OriginalDestinationPort: 80,
		Stats:        flowrecord.Counters{PacketTotal: 10, OctetTotal: 1000, PacketDelta: 10, OctetDelta: 1000},
		ReverseStats: flowrecord.Counters{PacketTotal: 8, OctetTotal: 4000, PacketDelta: 8, OctetDelta: 4000},
		EndReason:    flowrecord.EndReasonActiveTimeout, TCPState: "ESTABLISHED", FlowType: flowrecord.FlowTypeInterNode,
		Service: flowrecord.Service{PortName: "default/web:http", Address: cluster, Port: 80},
		EgressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaClusterNetworkPolicy, Name: "acnp-allow-web",
			RuleName: "allow-to-web", RuleAction: flowrecord.RuleActionAllow},
		Reporter: flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource},
	}
	r.Key = r.CorrelationKey()
	return r
}
