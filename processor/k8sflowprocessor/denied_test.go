package k8sflowprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestDeniedRecordsEnriched: the conntrack receiver's denied-connection
// records (an NFLOG-logged drop or reject: the rule's action on one policy,
// end of flow, reverse counters 0, no conntrack ID) are enriched like any
// record, and keep their action and counters.
func TestDeniedRecordsEnriched(t *testing.T) {
	cs := fake.NewClientset(clusterObjects()...)
	h := startHolding(t, nodeConfig("node-a"), func(*Config) (kubernetes.Interface, error) { return cs, nil }, func() time.Time { return t0.Add(time.Hour) })
	counters := flowrecord.Counters{PacketTotal: 3, OctetTotal: 180, PacketDelta: 3, OctetDelta: 180}
	denied := func(src, dst string, p flowrecord.Policy, egress bool) *flowrecord.Record {
		r := flowCase{reporter: "node-a", src: src, dst: dst}.record()
		r.Stats, r.ReverseStats, r.TCPState, r.EndReason, r.Conntrack = counters, flowrecord.Counters{}, "", flowrecord.EndReasonEndOfFlow, flowrecord.Conntrack{}
		if egress {
			r.EgressPolicy = p
		} else {
			r.IngressPolicy = p
		}
		return r
	}
	drop, reject := flowrecord.Policy{RuleAction: flowrecord.RuleActionDrop}, flowrecord.Policy{RuleAction: flowrecord.RuleActionReject}
	h.send(t,
		denied(hp(v4.dbB, 40000), hp(v4.webA, 80), drop, false),         // db-b (node-b) → web-a: ingress drop on node-a
		denied(hp(v4.client, 40001), hp(v4.external, 53), reject, true)) // client → 8.8.8.8: egress reject on node-a
	got := h.exported(t)
	require.Len(t, got, 2)

	in := got[v4.dbB]
	require.Equal(t, []string{"db-b", "node-b", "web-a", "node-a"}, []string{in.Source.PodName, in.Source.NodeName, in.Destination.PodName, in.Destination.NodeName})
	require.Equal(t, flowrecord.FlowTypeInterNode, in.FlowType)
	require.Equal(t, flowrecord.SideDestination, in.Reporter.Side)
	require.Equal(t, drop, in.IngressPolicy)
	require.Equal(t, counters, in.Stats)
	require.Equal(t, flowrecord.EndReasonEndOfFlow, in.EndReason)
	require.NotEmpty(t, in.Key)

	out := got[v4.client]
	require.Equal(t, "client", out.Source.PodName)
	require.Equal(t, flowrecord.EndpointExternal, out.Destination.Kind)
	require.Equal(t, flowrecord.FlowTypeToExternal, out.FlowType)
	require.Equal(t, flowrecord.SideSource, out.Reporter.Side)
	require.Equal(t, reject, out.EgressPolicy)
}
