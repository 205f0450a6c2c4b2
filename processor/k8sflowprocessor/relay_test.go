package k8sflowprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// A Node that DNATs another Node's client to an endpoint on a third Node
// (here node-b sends node-a's call of its NodePort on to web-a, back on
// node-a) reports the connection as its destination half, keyed by the tuple
// that reached it, and adds a relay leg keyed by the tuple it sent on, which
// is the endpoint Node's key: the gateway pairs and folds that leg away.
func TestNodePortForwardedToAnotherNodeAddsARelayLeg(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			cs := fake.NewClientset(clusterObjects()...)
			factory := newFactory(func(*Config) (kubernetes.Interface, error) { return cs, nil }, func() time.Time { return t0.Add(time.Hour) })
			sink := new(consumertest.LogsSink)
			proc, err := factory.CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), nodeConfig("node-b"), sink)
			require.NoError(t, err)
			require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
			t.Cleanup(func() { require.NoError(t, proc.Shutdown(context.Background())) })

			forwarded := nodePortCases(f)[4] // node-a → node-b:30080 → web-a, masqueraded by node-b
			require.Equal(t, "node-b", forwarded.reporter)
			ld := plog.NewLogs()
			sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
			encode(t, sl, forwarded.record())
			encode(t, sl, nodePortCases(f)[1].record()) // endpoint local to node-b: no relay leg
			require.NoError(t, proc.ConsumeLogs(context.Background(), ld))

			lrs := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			require.Equal(t, 3, lrs.Len())
			var first, local, relay flowrecord.Record
			require.NoError(t, attrcodec.Decode(lrs.At(0), &first))
			require.NoError(t, attrcodec.Decode(lrs.At(1), &local))
			require.NoError(t, attrcodec.Decode(lrs.At(2), &relay))
			assert.Equal(t, flowrecord.SideDestination, first.Reporter.Side)
			assert.Equal(t, forwarded.key, first.Key)
			assert.Equal(t, flowrecord.SideDestination, local.Reporter.Side)

			assert.Equal(t, flowrecord.SideRelay, relay.Reporter.Side)
			assert.Equal(t, "node-b", relay.Reporter.NodeName)
			assert.Equal(t, "6|"+hp(f.nodeB, 40022)+"|"+hp(f.webA, 80), relay.Key, "the tuple node-b sent on")
			assert.Equal(t, flowrecord.KeyHash(relay.Key), lrs.At(2).TraceID())
			assert.Equal(t, first.Service, relay.Service)

			// The endpoint Node sees node-b as the client: the same key.
			endpointHalf := flowCase{reporter: "node-a", src: hp(f.nodeB, 40022), dst: hp(f.webA, 80)}.record()
			reason, _ := nodeProcessors(t)["node-a"].enrich(endpointHalf)
			require.Empty(t, reason)
			assert.Equal(t, flowrecord.SideDestination, endpointHalf.Reporter.Side)
			assert.Equal(t, relay.Key, endpointHalf.Key)
		})
	}
}
