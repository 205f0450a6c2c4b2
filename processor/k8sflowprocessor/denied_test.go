package k8sflowprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// TestDeniedRecordsEnriched: the conntrack receiver's denied-connection
// records (an NFLOG-logged drop or reject: the rule's action on one policy,
// end of flow, reverse counters 0, no conntrack ID) are enriched like any
// record, and keep their action and counters.
func TestDeniedRecordsEnriched(t *testing.T) {
	cs := fake.NewClientset(clusterObjects()...)
	factory := newFactory(func(*Config) (kubernetes.Interface, error) { return cs, nil }, func() time.Time { return t0.Add(time.Hour) })
	sink := new(consumertest.LogsSink)
	proc, err := factory.CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), nodeConfig("node-a"), sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(context.Background())) })

	denied := func(src, dst string, p flowrecord.Policy, egress bool) *flowrecord.Record {
		r := flowCase{reporter: "node-a", src: src, dst: dst}.record()
		r.Stats = flowrecord.Counters{PacketTotal: 3, OctetTotal: 180, PacketDelta: 3, OctetDelta: 180}
		r.ReverseStats, r.TCPState, r.EndReason, r.Conntrack = flowrecord.Counters{}, "", flowrecord.EndReasonEndOfFlow, flowrecord.Conntrack{}
		if egress {
			r.EgressPolicy = p
		} else {
			r.IngressPolicy = p
		}
		return r
	}
	drop, reject := flowrecord.Policy{RuleAction: flowrecord.RuleActionDrop}, flowrecord.Policy{RuleAction: flowrecord.RuleActionReject}
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	encode(t, sl, denied(hp(v4.dbB, 40000), hp(v4.webA, 80), drop, false))         // db-b (node-b) → web-a: ingress drop on node-a
	encode(t, sl, denied(hp(v4.client, 40001), hp(v4.external, 53), reject, true)) // client → 8.8.8.8: egress reject on node-a
	require.NoError(t, proc.ConsumeLogs(context.Background(), ld))
	require.Equal(t, 2, sink.LogRecordCount())
	lrs := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()

	var in, out flowrecord.Record
	require.NoError(t, flowrecord.Decode(lrs.At(0), &in))
	require.NoError(t, flowrecord.Decode(lrs.At(1), &out))
	require.Equal(t, []string{"db-b", "node-b", "web-a", "node-a"}, []string{in.Source.PodName, in.Source.NodeName, in.Destination.PodName, in.Destination.NodeName})
	require.Equal(t, flowrecord.FlowTypeInterNode, in.FlowType)
	require.Equal(t, flowrecord.SideDestination, in.Reporter.Side)
	require.Equal(t, drop, in.IngressPolicy)
	require.Equal(t, flowrecord.Counters{PacketTotal: 3, OctetTotal: 180, PacketDelta: 3, OctetDelta: 180}, in.Stats)
	require.Equal(t, flowrecord.EndReasonEndOfFlow, in.EndReason)
	require.NotEmpty(t, in.Key)

	require.Equal(t, "client", out.Source.PodName)
	require.Equal(t, flowrecord.EndpointExternal, out.Destination.Kind)
	require.Equal(t, flowrecord.FlowTypeToExternal, out.FlowType)
	require.Equal(t, flowrecord.SideSource, out.Reporter.Side)
	require.Equal(t, reject, out.EgressPolicy)
}
