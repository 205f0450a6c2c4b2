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
	nodeB   = netip.MustParseAddr("192.168.77.12")
	gwB     = netip.MustParseAddr("10.10.1.1")
	client  = netip.MustParseAddr("203.0.113.50")
	egressX = netip.MustParseAddr("192.168.77.200")
)

// interNodeHalves: Pod a on node-a calls Service default/web (ClusterIP,
// DNATed on node-a) whose endpoint is Pod web on node-b; an Antrea
// ClusterNetworkPolicy admits it on egress, an Antrea NetworkPolicy on ingress.
func interNodeHalves(srcPort uint16) (src, dst agentRecord) {
	common := agentRecord{
		start: t0, end: t0.Add(5 * time.Second), exportTime: t0.Add(6 * time.Second), endReason: 2,
		flowType: uint8(flowrecord.FlowTypeInterNode), protocol: 6, tcpState: "ESTABLISHED",
		src: agentEndpoint{addr: podA, port: srcPort}, dst: agentEndpoint{addr: podB, port: 8080},
	}
	src, dst = common, common
	src.src = agentEndpoint{addr: podA, port: srcPort, namespace: "default", pod: "a", node: "node-a"}
	src.stats = agentCounters{packetTotal: 10, octetTotal: 1000, packetDelta: 10, octetDelta: 1000}
	src.reverse = agentCounters{packetTotal: 8, octetTotal: 4000, packetDelta: 8, octetDelta: 4000}
	src.serviceAddr, src.servicePort, src.servicePortName = cluster, 80, "default/web:http"
	src.egress = agentPolicy{typ: uint8(flowrecord.PolicyTypeAntreaClusterNetworkPolicy), name: "acnp-allow-web",
		rule: "allow-to-web", ruleAction: uint8(flowrecord.RuleActionAllow)}
	dst.dst = agentEndpoint{addr: podB, port: 8080, namespace: "default", pod: "web", node: "node-b"}
	dst.stats = agentCounters{packetTotal: 10, octetTotal: 1000, packetDelta: 10, octetDelta: 1000}
	dst.reverse = agentCounters{packetTotal: 8, octetTotal: 4000, packetDelta: 8, octetDelta: 4000}
	dst.ingress = agentPolicy{typ: uint8(flowrecord.PolicyTypeAntreaNetworkPolicy), namespace: "default", name: "anp-web",
		rule: "from-a", ruleAction: uint8(flowrecord.RuleActionAllow)}
	return src, dst
}

// intraNode: Pod a calls Pod c on the same Node (node-a): one record, both halves.
func intraNode() agentRecord {
	return agentRecord{
		start: t0, end: t0.Add(3 * time.Second), exportTime: t0.Add(4 * time.Second), endReason: 3,
		flowType: uint8(flowrecord.FlowTypeIntraNode), protocol: 17,
		src:   agentEndpoint{addr: podA, port: 5353, namespace: "default", pod: "a", node: "node-a"},
		dst:   agentEndpoint{addr: podC, port: 53, namespace: "kube-system", pod: "dns", node: "node-a"},
		stats: agentCounters{packetTotal: 2, octetTotal: 120, packetDelta: 2, octetDelta: 120},
	}
}

// nodePortHalves: an external client calls node-b's NodePort 30080 and
// node-b forwards to Pod c on node-a, SNATed to node-b's gateway address
// (Antrea's ingress-Node half, which names no Node); node-a reports the
// destination half as inter-Node from node-b's gateway.
func nodePortHalves() (ingress, dst agentRecord) {
	ingress = agentRecord{
		start: t0, end: t0.Add(2 * time.Second), exportTime: t0.Add(2 * time.Second), endReason: 2,
		flowType: uint8(flowrecord.FlowTypeFromExternal), protocol: 6, tcpState: "ESTABLISHED",
		src:         agentEndpoint{addr: client, port: 40000},
		dst:         agentEndpoint{addr: podC, port: 8080},
		stats:       agentCounters{packetTotal: 4, octetTotal: 400, packetDelta: 4, octetDelta: 400},
		serviceAddr: nodeB, servicePort: 30080, servicePortName: "default/web-np:http",
		proxySNATAddr: gwB, proxySNATPort: 61000,
	}
	dst = agentRecord{
		start: t0, end: t0.Add(2 * time.Second), exportTime: t0.Add(2 * time.Second), endReason: 2,
		flowType: uint8(flowrecord.FlowTypeInterNode), protocol: 6, tcpState: "ESTABLISHED",
		src:   agentEndpoint{addr: gwB, port: 61000},
		dst:   agentEndpoint{addr: podC, port: 8080, namespace: "kube-system", pod: "dns", node: "node-a"},
		stats: agentCounters{packetTotal: 4, octetTotal: 400, packetDelta: 4, octetDelta: 400},
	}
	return ingress, dst
}

// toExternal: Pod a reaches the Internet through Egress egress-x.
func toExternal() agentRecord {
	return agentRecord{
		start: t0, end: t0.Add(time.Second), exportTime: t0.Add(time.Second), endReason: 1,
		flowType: uint8(flowrecord.FlowTypeToExternal), protocol: 6, tcpState: "TIME_WAIT",
		src:        agentEndpoint{addr: podA, port: 41000, namespace: "default", pod: "a", node: "node-a"},
		dst:        agentEndpoint{addr: client, port: 443},
		stats:      agentCounters{packetTotal: 1, octetTotal: 60, packetDelta: 1, octetDelta: 60},
		egressName: "egress-x", egressAddr: egressX, egressNode: "node-b",
	}
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
