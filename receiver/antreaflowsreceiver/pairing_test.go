package antreaflowsreceiver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor"
)

// The gateway's pipeline in process: this receiver feeding the real
// flow_correlation processor (the test is the only place a component meets
// another: the gateway distribution wires them the same way).

type gateway struct {
	*started
	corr consumer.Logs
	out  *consumertest.LogsSink
}

func startGateway(t *testing.T, mut func(*Config)) *gateway {
	t.Helper()
	out := new(consumertest.LogsSink)
	f := flowcorrelationprocessor.NewFactory()
	proc, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), out)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(context.Background())) })
	s := startReceiverTo(t, proc, mut) // the receiver hands its halves to flow_correlation
	return &gateway{started: s, corr: proc, out: out}
}

// sendNodeHalf sends a half as flowtel's node collector does (OTLP, under
// its Node's resource) straight to flow_correlation.
func (g *gateway) sendNodeHalf(t *testing.T, r flowrecord.Record) {
	t.Helper()
	l := plog.NewLogs()
	rl := l.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(catalogue.ResourceNodeName, r.Reporter.NodeName)
	attrcodec.Encode(&r, rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
	require.NoError(t, g.corr.ConsumeLogs(context.Background(), l))
}

func (g *gateway) paired(t *testing.T, n int) []flowrecord.Record {
	t.Helper()
	waitRecords(t, g.out, n)
	got, _ := records(t, g.out.AllLogs())
	require.Len(t, got, n)
	return got
}

// checkInterNodePair: one record, paired, with what each agent knew: the
// source Pod, Service and Antrea ClusterNetworkPolicy from node-a, the
// destination Pod and Antrea NetworkPolicy from node-b, both Nodes' counters.
func checkInterNodePair(t *testing.T, r flowrecord.Record) {
	t.Helper()
	assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation)
	assert.Equal(t, "a", r.Source.PodName)
	assert.Equal(t, "node-a", r.Source.NodeName)
	assert.Equal(t, "web", r.Destination.PodName)
	assert.Equal(t, "node-b", r.Destination.NodeName)
	assert.Equal(t, "default/web:http", r.Service.PortName)
	assert.Equal(t, flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaClusterNetworkPolicy, Name: "acnp-allow-web",
		RuleName: "allow-to-web", RuleAction: flowrecord.RuleActionAllow}, r.EgressPolicy)
	assert.Equal(t, flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: "default", Name: "anp-web",
		RuleName: "from-a", RuleAction: flowrecord.RuleActionAllow}, r.IngressPolicy)
	require.NotNil(t, r.Aggregation)
	assert.Equal(t, uint64(1000), r.Aggregation.StatsFromSource.OctetTotal)
	assert.Equal(t, uint64(1000), r.Aggregation.StatsFromDestination.OctetTotal)
	assert.Equal(t, "6|10.10.0.5:43512|10.10.1.7:8080", r.Key)
}

// TestAgentHalvesPair: the halves two agents send, over either transport,
// pair in flow_correlation as flowtel's own do.
func TestAgentHalvesPair(t *testing.T) {
	p := newPKI(t)
	t.Run("ipfix", func(t *testing.T) {
		g := startGateway(t, nil)
		src, dst := interNodeHalves(43512)
		newAgent(t, g.cfg.IPFIX.Endpoint, "tcp", "node-a", nil).send(t, &src)
		newAgent(t, g.cfg.IPFIX.Endpoint, "udp", "node-b", nil).send(t, &dst)
		checkInterNodePair(t, g.paired(t, 1)[0])
	})
	t.Run("grpc", func(t *testing.T) {
		g := startGateway(t, func(c *Config) { p.secure(c) })
		src, dst := interNodeHalves(43512)
		creds := p.grpcTLS(t, p.clientCert, p.clientKey)
		require.NoError(t, exportGRPC(t, g.cfg.GRPC.Endpoint, creds, toFlow(&dst)))
		require.NoError(t, exportGRPC(t, g.cfg.GRPC.Endpoint, creds, toFlow(&src)))
		checkInterNodePair(t, g.paired(t, 1)[0])
	})
	t.Run("ipfix_and_grpc", func(t *testing.T) {
		g := startGateway(t, nil)
		src, dst := interNodeHalves(43512)
		newAgent(t, g.cfg.IPFIX.Endpoint, "tcp", "node-a", nil).send(t, &src)
		require.NoError(t, exportGRPC(t, g.cfg.GRPC.Endpoint, nil, toFlow(&dst)))
		checkInterNodePair(t, g.paired(t, 1)[0])
	})
}

// TestAgentHalfPairsWithNodeCollectorHalf: a cluster half migrated (one
// Node's agent still exporting, the other Node running flowtel's node
// collector) pairs across: the record k8s_flow writes for the other half
// (its side, both endpoints resolved, its key) meets the agent's.
func TestAgentHalfPairsWithNodeCollectorHalf(t *testing.T) {
	agentSrc, agentDst := interNodeHalves(43512)
	flowtelSrc := wantInterNodeSource(43512)
	flowtelSrc.Destination = flowrecord.Endpoint{Address: podB, Port: 8080, Kind: flowrecord.EndpointPod,
		Namespace: "default", PodName: "web", NodeName: "node-b"}
	flowtelDst := flowrecord.Record{
		Start: t0, End: t0.Add(5 * time.Second), Observed: t0.Add(6 * time.Second), Protocol: 6,
		Source: flowrecord.Endpoint{Address: podA, Port: 43512, Kind: flowrecord.EndpointPod, Namespace: "default",
			PodName: "a", NodeName: "node-a"},
		Destination:                flowtelSrc.Destination,
		OriginalDestinationAddress: podB, OriginalDestinationPort: 8080,
		Stats:        flowrecord.Counters{PacketTotal: 10, OctetTotal: 1000, PacketDelta: 10, OctetDelta: 1000},
		ReverseStats: flowrecord.Counters{PacketTotal: 8, OctetTotal: 4000, PacketDelta: 8, OctetDelta: 4000},
		EndReason:    flowrecord.EndReasonActiveTimeout, TCPState: "ESTABLISHED", FlowType: flowrecord.FlowTypeInterNode,
		IngressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: "default", Name: "anp-web",
			RuleName: "from-a", RuleAction: flowrecord.RuleActionAllow},
		Reporter: flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination},
	}
	flowtelDst.Key = flowtelDst.CorrelationKey()

	t.Run("agent_source", func(t *testing.T) {
		g := startGateway(t, nil)
		newAgent(t, g.cfg.IPFIX.Endpoint, "tcp", "node-a", nil).send(t, &agentSrc)
		g.sendNodeHalf(t, flowtelDst)
		checkInterNodePair(t, g.paired(t, 1)[0])
	})
	t.Run("agent_destination", func(t *testing.T) {
		g := startGateway(t, nil)
		g.sendNodeHalf(t, flowtelSrc)
		require.NoError(t, exportGRPC(t, g.cfg.GRPC.Endpoint, nil, toFlow(&agentDst)))
		checkInterNodePair(t, g.paired(t, 1)[0])
	})
}

// TestNodePortAndIntraNode: the ingress Node's SNATed half of a
// from-external NodePort connection (which names no Node) pairs with the
// endpoint Node's half; an intra-Node record needs no pairing.
func TestNodePortAndIntraNode(t *testing.T) {
	g := startGateway(t, nil)
	ingress, dst := nodePortHalves()
	newAgent(t, g.cfg.IPFIX.Endpoint, "tcp", "node-b", nil).send(t, &ingress)
	newAgent(t, g.cfg.IPFIX.Endpoint, "tcp", "node-a", nil).send(t, &dst)
	intra := intraNode()
	require.NoError(t, exportGRPC(t, g.cfg.GRPC.Endpoint, nil, toFlow(&intra)))
	got := g.paired(t, 2)
	byState := map[flowrecord.CorrelationState]flowrecord.Record{}
	for _, r := range got {
		byState[r.Correlation] = r
	}
	np := byState[flowrecord.CorrelationPaired]
	assert.Equal(t, client, np.Source.Address, "the external client, from the ingress Node's half")
	assert.Equal(t, "dns", np.Destination.PodName)
	assert.Equal(t, "default/web-np:http", np.Service.PortName)
	assert.Equal(t, gwB, np.ProxySNATAddress)
	assert.Equal(t, "6|10.10.1.1:61000|10.10.0.9:8080", np.Key)
	in := byState[flowrecord.CorrelationNotRequired]
	assert.Equal(t, "dns", in.Destination.PodName)
	assert.Equal(t, flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideBoth}, in.Reporter)
}

// agentCluster is the Nodes of the fixtures as the API server holds them:
// node-a (podCIDR 10.10.0.0/24, gateway 10.10.0.1) runs Pods a and c,
// node-b (10.10.1.0/24, gateway gwB) runs Pod web.
func agentCluster() *fake.Clientset {
	node := func(name, cidr, ip string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
			Spec:   corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	}
	return fake.NewClientset(node("node-a", "10.10.0.0/24", "192.168.77.11"), node("node-b", "10.10.1.0/24", nodeB.String()))
}

// withNodes has the receiver watch the Nodes of cs.
func withNodes(cs kubernetes.Interface) func(*Config) {
	return func(c *Config) {
		c.Kubernetes = configoptional.Some(KubernetesConfig{AuthType: "serviceAccount"})
		c.kubeClient = cs
	}
}

// TestHostToLocalPodIsIntraNode (issue 41.4, Antrea issue #8260): a kubelet
// probe from node-a's gateway address (antrea-gw0) to Pod c on node-a, which
// the agent labels inter-Node with only the destination Node named, is an
// intra-Node connection whose source is node-a itself (decisions D1, D2): one
// record with both halves, which flow_correlation exports not_required
// rather than holding it for a source half that never comes. So is Pod c
// calling node-a's InternalIP (the agent's to-external). A remote Node's
// gateway (the NodePort SNAT of nodePortHalves) stays inter-Node and pairs.
func TestHostToLocalPodIsIntraNode(t *testing.T) {
	gwA := netip.MustParseAddr("10.10.0.1")
	probe := agentRecord{Record: flowrecord.Record{
		Start: t0, End: t0.Add(time.Second), Observed: t0.Add(time.Second), EndReason: flowrecord.EndReasonEndOfFlow,
		FlowType: flowrecord.FlowTypeInterNode, Protocol: 6, TCPState: "TIME_WAIT",
		Source:      flowrecord.Endpoint{Address: gwA, Port: 51234},
		Destination: flowrecord.Endpoint{Address: podC, Port: 8080, Namespace: "kube-system", PodName: "dns", NodeName: "node-a"},
		Stats:       flowrecord.Counters{PacketTotal: 6, OctetTotal: 500, PacketDelta: 6, OctetDelta: 500},
	}}
	toHost := agentRecord{Record: flowrecord.Record{
		Start: t0, End: t0.Add(time.Second), Observed: t0.Add(time.Second), EndReason: flowrecord.EndReasonEndOfFlow,
		FlowType: flowrecord.FlowTypeToExternal, Protocol: 6, TCPState: "TIME_WAIT",
		Source:      flowrecord.Endpoint{Address: podC, Port: 40001, Namespace: "kube-system", PodName: "dns", NodeName: "node-a"},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("192.168.77.11"), Port: 10250},
		Stats:       flowrecord.Counters{PacketTotal: 4, OctetTotal: 300, PacketDelta: 4, OctetDelta: 300},
	}}
	g := startGateway(t, withNodes(agentCluster()))
	ag := newAgent(t, g.cfg.IPFIX.Endpoint, "tcp", "node-a", nil)
	ag.send(t, &probe)
	require.NoError(t, exportGRPC(t, g.cfg.GRPC.Endpoint, nil, toFlow(&toHost)))
	ingress, dst := nodePortHalves()
	newAgent(t, g.cfg.IPFIX.Endpoint, "tcp", "node-b", nil).send(t, &ingress)
	ag.send(t, &dst)

	got := g.paired(t, 3)
	byDst := map[uint16]flowrecord.Record{}
	for _, r := range got {
		byDst[r.Destination.Port] = r
	}
	p := byDst[8080]
	if p.Source.Address != gwA {
		for _, r := range got {
			if r.Source.Address == gwA {
				p = r
			}
		}
	}
	require.Equal(t, gwA, p.Source.Address)
	assert.Equal(t, flowrecord.CorrelationNotRequired, p.Correlation, "no source half is awaited")
	assert.Equal(t, flowrecord.FlowTypeIntraNode, p.FlowType)
	assert.Equal(t, flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideBoth}, p.Reporter)
	assert.Equal(t, flowrecord.Endpoint{Address: gwA, Port: 51234, Kind: flowrecord.EndpointNode, NodeName: "node-a", NodeUID: "uid-node-a"}, p.Source)
	assert.Equal(t, "dns", p.Destination.PodName)

	h := byDst[10250]
	assert.Equal(t, flowrecord.CorrelationNotRequired, h.Correlation)
	assert.Equal(t, flowrecord.FlowTypeIntraNode, h.FlowType)
	assert.Equal(t, flowrecord.EndpointNode, h.Destination.Kind)
	assert.Equal(t, "node-a", h.Destination.NodeName)

	var np flowrecord.Record
	for _, r := range got {
		if r.Correlation == flowrecord.CorrelationPaired {
			np = r
		}
	}
	assert.Equal(t, "6|10.10.1.1:61000|10.10.0.9:8080", np.Key, "a remote Node's gateway is still an inter-Node source")
}

// TestNodePortPairsFromAgentsWithoutServiceIP (issue 42.10): Antrea v2.6
// agents send the Service address only as destinationClusterIPv4/6 (IEs 106,
// 107), not destinationServiceIPv4/6; the IPFIX path falls back to it as the
// gRPC path does, so the NodePort halves keep their pre-DNAT destination
// and pair.
func TestNodePortPairsFromAgentsWithoutServiceIP(t *testing.T) {
	g := startGateway(t, nil)
	v26 := []string{"destinationServiceIPv4", "destinationServiceIPv6"}
	ingress, dst := nodePortHalves()
	newAgentWithout(t, g.cfg.IPFIX.Endpoint, "tcp", "node-b", nil, v26...).send(t, &ingress)
	newAgentWithout(t, g.cfg.IPFIX.Endpoint, "tcp", "node-a", nil, v26...).send(t, &dst)
	got := g.paired(t, 1)
	np := got[0]
	assert.Equal(t, flowrecord.CorrelationPaired, np.Correlation)
	assert.Equal(t, nodeB, np.Service.Address, "from destinationClusterIPv4")
	assert.Equal(t, nodeB, np.OriginalDestinationAddress)
	assert.Equal(t, client, np.Source.Address)
}
