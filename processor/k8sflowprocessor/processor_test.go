package k8sflowprocessor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// metricValues sums a counter's data points by their reason attribute ("" without).
func metricValues(t *testing.T, tt *componenttest.Telemetry, name string) map[string]int64 {
	t.Helper()
	m, err := tt.GetMetric(name)
	require.NoError(t, err, name)
	out := map[string]int64{}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			r, ok := dp.Attributes.Value("reason")
			if !ok {
				r, _ = dp.Attributes.Value("outcome")
			}
			out[r.AsString()] += dp.Value
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			r, _ := dp.Attributes.Value("resource")
			out[r.AsString()] = dp.Value
		}
	default:
		t.Fatalf("%s: unexpected data %T", name, m.Data)
	}
	return out
}

func encode(t *testing.T, sl plog.ScopeLogs, r *flowrecord.Record) {
	t.Helper()
	attrcodec.Encode(r, sl.LogRecords().AppendEmpty())
}

// The whole path: plog in, decoded, enriched, dropped or re-encoded, counted.
func TestProcessLogs(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	cs := fake.NewClientset(clusterObjects()...)
	factory := newFactory(func(*Config) (kubernetes.Interface, error) { return cs, nil }, func() time.Time { return t0.Add(time.Hour) })
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	sink := new(consumertest.LogsSink)
	proc, err := factory.CreateLogs(context.Background(), set, nodeConfig("node-a"), sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(context.Background())) })
	assert.True(t, proc.Capabilities().MutatesData)

	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	seed := issue8260Cases(v4)
	encode(t, sl, seed[0].record())                                                                        // Node → local Pod: kept
	encode(t, sl, moreCases(v4)[0].record())                                                               // remote → remote: dropped
	encode(t, sl, flowCase{reporter: "node-a", src: hp(v4.client, 1), dst: hp("10.244.2.99", 2)}.record()) // kept, 1 unresolved
	sl.LogRecords().AppendEmpty().Attributes().PutStr("source.address", "not an address")                  // bad input
	// A second resource whose only record is dropped disappears entirely.
	encode(t, ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty(), moreCases(v4)[0].record())

	require.NoError(t, proc.ConsumeLogs(context.Background(), ld))
	require.Equal(t, 2, sink.LogRecordCount())
	out := sink.AllLogs()[0]
	require.Equal(t, 1, out.ResourceLogs().Len())
	lrs := out.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()

	var got flowrecord.Record
	require.NoError(t, attrcodec.Decode(lrs.At(0), &got))
	assert.Equal(t, flowrecord.FlowTypeIntraNode, got.FlowType)
	assert.Equal(t, flowrecord.SideBoth, got.Reporter.Side)
	assert.Equal(t, flowrecord.EndpointNode, got.Source.Kind)
	assert.Equal(t, "node-a", got.Source.NodeName)
	assert.Equal(t, "web-a", got.Destination.PodName)
	assert.Equal(t, "6|10.244.1.1:47968|10.244.1.6:80", got.Key)
	assert.Equal(t, flowrecord.KeyHash(got.Key), lrs.At(0).TraceID(), "TraceID is the key's hash")

	assert.Equal(t, map[string]int64{"": 5}, metricValues(t, tt, "otelcol_processor_k8s_flow_records_received"))
	assert.Equal(t, map[string]int64{"": 2}, metricValues(t, tt, "otelcol_processor_k8s_flow_records_enriched"))
	assert.Equal(t, map[string]int64{reasonNoLocalEndpoint: 2, reasonDecodeError: 1}, metricValues(t, tt, "otelcol_processor_k8s_flow_records_dropped"))
	assert.Equal(t, map[string]int64{reasonUnknownPod: 1}, metricValues(t, tt, "otelcol_processor_k8s_flow_addresses_unresolved"))
	cache := metricValues(t, tt, "otelcol_processor_k8s_flow_cache_objects")
	assert.Equal(t, int64(2), cache["pods"], "node-a's Pods, without the hostNetwork one")
	assert.Equal(t, int64(2), cache["nodes"])
	assert.Equal(t, int64(3), cache["services"])
	assert.Equal(t, int64(2), cache["endpointslices"])
	assert.Equal(t, int64(1), cache["owners"])

	// A batch with nothing left is not passed on.
	ld = plog.NewLogs()
	encode(t, ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty(), moreCases(v4)[0].record())
	require.NoError(t, proc.ConsumeLogs(context.Background(), ld))
	assert.Len(t, sink.AllLogs(), 1)
}

// With pods: all and no node_name (a gateway), each record's reporter Node decides.
func TestNodeNameFromRecord(t *testing.T) {
	cfg := nodeConfig("")
	cfg.Pods = PodsAll
	p, _ := startProcessor(t, cfg, newFakeClock(t0.Add(time.Hour)), clusterObjects()...)
	c := issue8260Cases(v4)[1] // reported by node-b
	r := c.record()
	require.Empty(t, first(p.enrich(r)))
	assert.Equal(t, flowrecord.SideSource, r.Reporter.Side)
	assert.Equal(t, "web-a", r.Destination.PodName)
	r = c.record()
	r.Reporter.NodeName = ""
	assert.Equal(t, reasonNoNodeName, first(p.enrich(r)))
}

// unreachableKubeconfig names an API server that refuses connections
// (127.0.0.1:1); the generated lifecycle test uses it too (metadata.yaml).
const unreachableKubeconfig = "testdata/unreachable-kubeconfig.yaml"

func startErr(t *testing.T, cfg *Config, client clientFunc) error {
	t.Helper()
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), cfg, client, time.Now)
	require.NoError(t, err)
	err = p.start(context.Background(), componenttest.NewNopHost())
	require.NoError(t, p.shutdown(context.Background()))
	return err
}

func TestStartErrors(t *testing.T) {
	t.Run("RBAC forbids a list: names resource and verb", func(t *testing.T) {
		cs := fake.NewClientset(clusterObjects()...)
		cs.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "",
				errors.New(`User "system:serviceaccount:flowtel:node" cannot list resource "endpointslices"`))
		})
		err := startErr(t, nodeConfig("node-a"), func(*Config) (kubernetes.Interface, error) { return cs, nil })
		require.Error(t, err)
		assert.Contains(t, err.Error(), "list endpointslices.discovery.k8s.io: forbidden by RBAC")
	})
	t.Run("API server unreachable", func(t *testing.T) {
		cfg := nodeConfig("node-a")
		cfg.AuthType, cfg.KubeConfig, cfg.WaitForSyncTimeout = "kubeConfig", unreachableKubeconfig, 2*time.Second
		err := startErr(t, cfg, newClient)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "list pods: the API server did not answer")
		assert.Contains(t, err.Error(), "connection refused")

		// Without wait_for_sync Start succeeds, the informers retry, and
		// Shutdown stops them (goleak checks).
		cfg.WaitForSync = false
		require.NoError(t, startErr(t, cfg, newClient))
	})
	t.Run("missing kubeconfig", func(t *testing.T) {
		cfg := nodeConfig("node-a")
		cfg.AuthType, cfg.KubeConfig = "kubeConfig", "/nonexistent/kubeconfig"
		assert.ErrorContains(t, startErr(t, cfg, newClient), `kubeconfig: cannot load "/nonexistent/kubeconfig"`)
	})
	t.Run("serviceAccount outside a cluster", func(t *testing.T) {
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		assert.ErrorContains(t, startErr(t, nodeConfig("node-a"), newClient), "auth_type: serviceAccount found no in-cluster credentials")
	})
}

// TestFactory: the default configuration with a node name creates a
// processor that shuts down without a start (the generated tests check the
// type and the config struct).
func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.LogsStability, f.LogsStability())
	cfg := f.CreateDefaultConfig()
	cfg.(*Config).NodeName = "node-a"
	p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NotNil(t, p)
	require.NoError(t, p.Shutdown(context.Background()), "shutdown without start")

	// processortest.VerifyShutdown does not apply: it sends logs that are not
	// flow records, which this processor drops. Shutdown stopping every
	// goroutine is checked by goleak after each test that starts one.
	var _ processor.Factory = f
}

// With wait_for_sync: false, records arriving before the caches are filled
// are dropped and counted (they cannot be classified); afterwards they flow.
func TestNotSyncedYet(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	cs := fake.NewClientset(clusterObjects()...)
	release := make(chan struct{})
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release // the API server is slow to answer
		return false, nil, nil
	})
	cfg := nodeConfig("node-a")
	cfg.WaitForSync = false
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	sink := new(consumertest.LogsSink)
	proc, err := newFactory(func(*Config) (kubernetes.Interface, error) { return cs, nil }, time.Now).CreateLogs(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, proc.Shutdown(context.Background())) })
	var once bool
	t.Cleanup(func() {
		if !once {
			close(release)
		}
	})

	batch := func() plog.Logs {
		ld := plog.NewLogs()
		encode(t, ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty(), issue8260Cases(v4)[0].record())
		return ld
	}
	require.NoError(t, proc.ConsumeLogs(context.Background(), batch()))
	assert.Equal(t, 0, sink.LogRecordCount())
	assert.Equal(t, map[string]int64{reasonNotSynced: 1}, metricValues(t, tt, "otelcol_processor_k8s_flow_records_dropped"))

	close(release)
	once = true
	eventually(t, "records flow once synced", func() bool {
		require.NoError(t, proc.ConsumeLogs(context.Background(), batch()))
		return sink.LogRecordCount() > 0
	})
}
