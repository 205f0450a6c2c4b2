package flowcorrelationprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

const testClusterUID = "2d9b7c1e-5a4f-4b3e-8c2d-1f0e9a8b7c6d"

// gatewayCluster is what the gateway's index sees: interNode(5, ...)'s
// client 10.1.0.5 on node-a and server 10.2.0.5 on node-b, and a Pod that
// held 10.2.0.5 before the server (deleted when the server was created).
func gatewayCluster() *fake.Clientset {
	node := func(name, cidr string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.NodeSpec{PodCIDRs: []string{cidr}}}
	}
	pod := func(name, node, ip string, created time.Time) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		}
	}
	return fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: testClusterUID}},
		node("node-a", "10.1.0.0/16"), node("node-b", "10.2.0.0/16"),
		pod("client", "node-a", "10.1.0.5", t0.Add(-time.Hour)),
		pod("server", "node-b", "10.2.0.5", t0.Add(-time.Hour)),
	)
}

func withKubernetes(cfg *Config) *Config {
	k := defaultKubernetesConfig()
	k.WaitForSyncTimeout = 10 * time.Second
	cfg.Kubernetes = configoptional.Some(k)
	return cfg
}

func newGatewayHarness(t *testing.T, cfg *Config, cs kubernetes.Interface) (*harness, *consumertest.LogsSink) {
	t.Helper()
	sink := &consumertest.LogsSink{}
	tel := componenttest.NewTelemetry()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	clk := newFakeClock()
	p, err := newProcessorWithClient(set, cfg, sink, clk, func(*KubernetesConfig) (kubernetes.Interface, error) { return cs, nil })
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() {
		require.NoError(t, p.Shutdown(context.Background()))
		require.NoError(t, tel.Shutdown(context.Background()))
	})
	return &harness{p: p, clock: clk, tel: tel}, sink
}

// An unpaired half gets its peer's Pod and Node identity from the gateway's
// index; what the Node said is kept.
func TestGatewayNamesUnpairedHalfsPeer(t *testing.T) {
	for _, tc := range []struct {
		name string
		half func(src, dst *flowrecord.Record) *flowrecord.Record
	}{
		{"source half", func(src, _ *flowrecord.Record) *flowrecord.Record { return src }},
		{"destination half", func(_, dst *flowrecord.Record) *flowrecord.Record { return dst }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, sink := newGatewayHarness(t, withKubernetes(aggregateConfig()), gatewayCluster())
			src, dst := interNode(5, t0.Add(5*time.Second), 1000, 1000)
			src.Source.Namespace, dst.Destination.Namespace = "shop-as-the-node-said", "shop-as-the-node-said"
			require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(tc.half(src, dst))))
			h.clock.advance(h.p.cfg.pairingTimeout())

			got := decodeAllLogs(t, sink.AllLogs())
			require.Len(t, got, 1)
			r := got[0]
			assert.Equal(t, flowrecord.CorrelationUnpaired, r.Correlation)
			assert.Equal(t, "client", r.Source.PodName)
			assert.Equal(t, "server", r.Destination.PodName)
			assert.Equal(t, "node-a", r.Source.NodeName)
			assert.Equal(t, "node-b", r.Destination.NodeName)
			if tc.name == "source half" {
				assert.Equal(t, "shop-as-the-node-said", r.Source.Namespace, "the Node's identity is not overwritten")
				assert.Equal(t, "shop", r.Destination.Namespace)
				assert.Equal(t, "uid-server", r.Destination.PodUID)
				assert.Equal(t, "uid-node-b", r.Destination.NodeUID)
			} else {
				assert.Equal(t, "shop", r.Source.Namespace)
				assert.Equal(t, "uid-client", r.Source.PodUID)
				assert.Equal(t, "shop-as-the-node-said", r.Destination.Namespace)
			}
		})
	}
}

// Proxy mode: each record passes through with both sides named.
func TestGatewayNamesBothSidesInProxyMode(t *testing.T) {
	cfg := withKubernetes(aggregateConfig())
	cfg.Mode = ModeProxy
	h, sink := newGatewayHarness(t, cfg, gatewayCluster())
	src, dst := interNode(5, t0.Add(5*time.Second), 1000, 1000)
	bare := *src // a record no Node named (e.g. an agent that knows no Pods)
	bare.Source = flowrecord.Endpoint{Address: src.Source.Address, Port: src.Source.Port}
	bare.Destination = flowrecord.Endpoint{Address: src.Destination.Address, Port: src.Destination.Port}
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src, dst, &bare)))

	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 3)
	for i, r := range got {
		assert.Equal(t, "client", r.Source.PodName, i)
		assert.Equal(t, "server", r.Destination.PodName, i)
		assert.Equal(t, "node-a", r.Source.NodeName, i)
		assert.Equal(t, "node-b", r.Destination.NodeName, i)
		assert.Equal(t, flowrecord.EndpointPod, r.Destination.Kind, i)
	}
	assert.Equal(t, flowrecord.DirectionEgress, got[0].Direction, "direction from what the Node reported")
	res, ok := sink.AllLogs()[0].ResourceLogs().At(0).Resource().Attributes().Get(catalogue.ResourceClusterUID)
	require.True(t, ok, "a proxied resource without a cluster UID gets the cluster's")
	assert.Equal(t, testClusterUID, res.Str())
}

// Names are time-aware at the gateway too: a connection that started before
// an IP was reused is named after the Pod that owned it then.
func TestGatewayNamesAreTimeAware(t *testing.T) {
	cs := gatewayCluster()
	h, sink := newGatewayHarness(t, withKubernetes(aggregateConfig()), cs)
	// server is deleted and its IP reused by server-2.
	require.NoError(t, cs.CoreV1().Pods("shop").Delete(ctx, "server", metav1.DeleteOptions{}))
	_, err := cs.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "server-2", UID: "uid-server-2", CreationTimestamp: metav1.NewTime(t0.Add(time.Minute))},
		Spec:       corev1.PodSpec{NodeName: "node-b"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.2.0.5", PodIPs: []corev1.PodIP{{IP: "10.2.0.5"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.p.identity.ix.Sizes().Pods == 3 }, 5*time.Second, 10*time.Millisecond)

	// server was deleted at t0 (the gateway's clock): a connection that
	// started a minute before is its; one that started after server-2 was created, server-2's.
	old, _ := interNode(5, t0.Add(5*time.Second), 1000, 1000)
	old.Start = t0.Add(-time.Minute)
	newer, _ := interNode(5, t0.Add(2*time.Minute), 1000, 1000)
	newer.Start, newer.Source.Port = t0.Add(90*time.Second), 40005
	newer.Key = newer.CorrelationKey()
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(old, newer)))
	h.clock.advance(h.p.cfg.pairingTimeout())
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 2)
	byStart := map[time.Time]string{got[0].Start: got[0].Destination.PodName, got[1].Start: got[1].Destination.PodName}
	assert.Equal(t, "server", byStart[t0.Add(-time.Minute)])
	assert.Equal(t, "server-2", byStart[t0.Add(90*time.Second)])
}

// The aggregate output keeps each record under its cluster's resource
// (k8s.cluster.uid from the node collectors); with the gateway's index, a
// record that came without one gets the cluster's.
func TestAggregateOutputKeepsTheClusterUID(t *testing.T) {
	under := func(uid string, recs ...*flowrecord.Record) plog.Logs {
		ld := logsOf(recs...)
		if uid != "" {
			ld.ResourceLogs().At(0).Resource().Attributes().PutStr(catalogue.ResourceClusterUID, uid)
		}
		return ld
	}
	clusters := func(sink *consumertest.LogsSink) map[string]int {
		out := map[string]int{}
		for _, ld := range sink.AllLogs() {
			for i := range ld.ResourceLogs().Len() {
				rl := ld.ResourceLogs().At(i)
				uid := ""
				if v, ok := rl.Resource().Attributes().Get(catalogue.ResourceClusterUID); ok {
					uid = v.Str()
				}
				out[uid] += rl.ScopeLogs().At(0).LogRecords().Len()
			}
		}
		return out
	}
	t.Run("without the index", func(t *testing.T) {
		sink := &consumertest.LogsSink{}
		h := newHarness(t, aggregateConfig(), sink)
		src, dst := interNode(1, t0.Add(5*time.Second), 1000, 1000)
		intra, _ := interNode(2, t0.Add(5*time.Second), 1000, 1000)
		intra.FlowType, intra.Reporter.Side = flowrecord.FlowTypeIntraNode, flowrecord.SideBoth
		require.NoError(t, h.p.ConsumeLogs(ctx, under("c-1", src)))
		require.NoError(t, h.p.ConsumeLogs(ctx, under("c-1", dst)))
		require.NoError(t, h.p.ConsumeLogs(ctx, under("", intra)))
		assert.Equal(t, map[string]int{"c-1": 1, "": 1}, clusters(sink))
	})
	t.Run("with the index", func(t *testing.T) {
		h, sink := newGatewayHarness(t, withKubernetes(aggregateConfig()), gatewayCluster())
		intra, _ := interNode(2, t0.Add(5*time.Second), 1000, 1000)
		intra.FlowType, intra.Reporter.Side = flowrecord.FlowTypeIntraNode, flowrecord.SideBoth
		other := *intra
		other.Source.Port++
		other.Key = other.CorrelationKey()
		require.NoError(t, h.p.ConsumeLogs(ctx, under("", intra)))
		require.NoError(t, h.p.ConsumeLogs(ctx, under("c-1", &other)))
		assert.Equal(t, map[string]int{testClusterUID: 1, "c-1": 1}, clusters(sink))
	})
}

// Without the kubernetes section the gateway has no index and asks no API server.
func TestGatewayWithoutKubernetesHasNoIndex(t *testing.T) {
	called := false
	p, err := newProcessorWithClient(processortest.NewNopSettings(metadata.Type), aggregateConfig(), consumertest.NewNop(), newFakeClock(),
		func(*KubernetesConfig) (kubernetes.Interface, error) { called = true; return nil, nil })
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, p.Shutdown(ctx))
	assert.Nil(t, p.identity)
	assert.False(t, called)
}
