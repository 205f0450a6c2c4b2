package flowstreamexporter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// view converts a record as a stream with the given tiers sees it.
func viewAt(r *flowrecord.Record, src, dst tier) *pb.Flow {
	return toFlow(redact(r, src, dst), src, dst)
}

func TestTierFull(t *testing.T) {
	f := viewAt(podRecord("ns-a", "web", "ns-b", "api"), tierFull, tierFull)
	k := f.K8S
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, k.SourceDisclosure)
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, k.DestinationDisclosure)
	assert.Equal(t, "node-a", k.SourceNodeName)
	assert.Equal(t, "node-b", k.DestinationNodeName)
	assert.Equal(t, "egress-1", k.EgressName)
	require.NotNil(t, f.Ipfix, "both endpoints in full: the IPFIX block is kept")
	assert.Equal(t, "192.168.0.1", f.Ipfix.ExporterIp)
	assert.Equal(t, uint32(7), f.Ipfix.ObservationDomainId)
}

func TestTierIdentity(t *testing.T) {
	r := podRecord("ns-a", "web", "ns-b", "api")
	// The source is the peer at the Identity tier.
	f := viewAt(r, tierIdentity, tierFull)
	k := f.K8S
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, k.SourceDisclosure)
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, k.DestinationDisclosure)
	assert.Equal(t, []string{"ns-a", "web", "uid-web"}, []string{k.SourcePodNamespace, k.SourcePodName, k.SourcePodUid})
	assert.Equal(t, map[string]string{"app": "web"}, k.SourcePodLabels.GetLabels())
	assert.Equal(t, []string{"", ""}, []string{k.SourceNodeName, k.SourceNodeUid}, "the peer's Node is never named")
	assert.Empty(t, k.EgressName+k.EgressNodeName+k.EgressNodeUid+k.EgressUid)
	assert.Nil(t, k.EgressIp)
	assert.Equal(t, []string{"ns-a", "allow-out", "uid-np-out", "r-out"},
		[]string{k.EgressNetworkPolicyNamespace, k.EgressNetworkPolicyName, k.EgressNetworkPolicyUid, k.EgressNetworkPolicyRuleName},
		"policy identity comes with the Identity tier")
	assert.Equal(t, "node-b", k.DestinationNodeName, "the Full endpoint keeps its Node")
	assert.Nil(t, f.Ipfix, "one endpoint below Full: no IPFIX block")
	assert.Equal(t, []byte{10, 10, 0, 1}, f.ProxySnatIp, "proxy_snat_* is never redacted")

	// The destination at Identity keeps the Service fields.
	f = viewAt(r, tierFull, tierIdentity)
	k = f.K8S
	assert.Equal(t, "ns-b/api-svc:http", k.DestinationServicePortName)
	assert.Equal(t, []byte{10, 96, 0, 20}, k.DestinationServiceIp)
	assert.Equal(t, "uid-svc", k.DestinationServiceUid)
	assert.Equal(t, uint32(80), k.DestinationServicePort)
	assert.Empty(t, k.DestinationNodeName)
	assert.Equal(t, "egress-1", k.EgressName, "Egress belongs to the source endpoint")
}

func TestTierFlow(t *testing.T) {
	r := podRecord("ns-a", "web", "ns-b", "api")
	f := viewAt(r, tierFull, tierFlow)
	k := f.K8S
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.DestinationDisclosure)
	assert.Equal(t, "ns-b", k.DestinationPodNamespace, "an allowed connection keeps the peer's Namespace")
	assert.Empty(t, k.DestinationPodName+k.DestinationPodUid+k.DestinationNodeName+k.DestinationNodeUid)
	assert.Nil(t, k.DestinationPodLabels)
	assert.Empty(t, k.IngressNetworkPolicyNamespace+k.IngressNetworkPolicyName+k.IngressNetworkPolicyUid+k.IngressNetworkPolicyRuleName)
	assert.Equal(t, pb.NetworkPolicyType_NETWORK_POLICY_TYPE_K8S, k.IngressNetworkPolicyType, "policy type at every tier")
	assert.Equal(t, pb.NetworkPolicyRuleAction_NETWORK_POLICY_RULE_ACTION_ALLOW, k.IngressNetworkPolicyRuleAction, "rule action at every tier")
	assert.Empty(t, k.DestinationServicePortName+k.DestinationServiceUid, "Service fields follow the destination's tier")
	assert.Nil(t, k.DestinationServiceIp)
	assert.Nil(t, k.DestinationClusterIp)
	assert.Zero(t, k.DestinationServicePort)
	assert.Equal(t, pb.FlowType_FLOW_TYPE_INTER_NODE, k.FlowType, "flow type is never redacted")
	assert.Equal(t, []byte{10, 10, 1, 7}, f.Ip.Destination)
	assert.Equal(t, uint32(8080), f.Transport.DestinationPort)
	assert.Equal(t, uint64(3400), f.Stats.OctetTotalCount)
	assert.Equal(t, "ESTABLISHED", f.Transport.GetTcp().GetStateName())
	assert.Nil(t, f.Ipfix)
	// The source, in full, is untouched.
	assert.Equal(t, []string{"web", "node-a", "allow-out"}, []string{k.SourcePodName, k.SourceNodeName, k.EgressNetworkPolicyName})

	f = viewAt(r, tierFlow, tierFull)
	k = f.K8S
	assert.Empty(t, k.SourcePodName+k.SourceNodeName+k.EgressName+k.EgressNetworkPolicyName)
	assert.Equal(t, "ns-a", k.SourcePodNamespace)
	assert.Equal(t, "ns-b/api-svc:http", k.DestinationServicePortName, "the destination is in full")
}

func TestTierFlowDeniedHidesNamespace(t *testing.T) {
	for _, action := range []flowrecord.RuleAction{flowrecord.RuleActionDrop, flowrecord.RuleActionReject} {
		r := podRecord("ns-a", "scanner", "ns-b", "api")
		r.IngressPolicy.RuleAction = action
		k := viewAt(r, tierFull, tierFlow).K8S
		assert.Empty(t, k.DestinationPodNamespace, "a denied connection withholds the unidentified peer's Namespace")
		assert.Equal(t, "ns-a", k.SourcePodNamespace)
		k = viewAt(r, tierFlow, tierFull).K8S
		assert.Empty(t, k.SourcePodNamespace)
		// Identity keeps the Namespace even when denied.
		assert.Equal(t, "ns-b", viewAt(r, tierFull, tierIdentity).K8S.DestinationPodNamespace)
	}
}

func TestNodeEndpoint(t *testing.T) {
	// A host-network client on node-c (flowtel's node endpoint, no Namespace)
	// calling a Pod of ns-b: on ns-b's stream the Node endpoint is at the Flow
	// tier, so its Node is not named.
	r := podRecord("", "", "ns-b", "api")
	r.Source = flowrecord.Endpoint{Address: netip.MustParseAddr("192.168.0.13"), Port: 40000, Kind: flowrecord.EndpointNode, NodeName: "node-c", NodeUID: "uid-node-c"}
	r.EgressPolicy = flowrecord.Policy{}
	v := &viewer{scope: scope{namespace: "ns-b"}, access: &access{}}
	require.Equal(t, tierFlow, v.tier(t.Context(), r.Source.Namespace))
	k := viewAt(r, tierFlow, tierFull).K8S
	assert.Empty(t, k.SourceNodeName+k.SourceNodeUid)
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.SourceDisclosure)
	// A cluster-wide stream sees it in full.
	v.scope = scope{clusterWide: true}
	require.Equal(t, tierFull, v.tier(t.Context(), ""))
}

func TestRedactLeavesTheRingAlone(t *testing.T) {
	r := podRecord("ns-a", "web", "ns-b", "api")
	before := *r
	_ = redact(r, tierFlow, tierFlow)
	require.Equal(t, before, *r)
	require.Equal(t, map[string]string{"app": "web"}, r.Source.PodLabels)
}
