package k8sflowprocessor

import (
	"context"
	"sync"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// holdingProcessor is a started k8s_flow processor (through the factory, so
// that held records reach sink) with its telemetry; shutdown may be called
// by the test and runs at cleanup otherwise.
type holdingProcessor struct {
	processor.Logs
	sink     *consumertest.LogsSink
	tt       *componenttest.Telemetry
	shutdown func()
}

func startHolding(t *testing.T, cfg *Config, client clientFunc, now func() time.Time) *holdingProcessor {
	t.Helper()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	sink := new(consumertest.LogsSink)
	proc, err := newFactory(client, now).CreateLogs(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(context.Background(), componenttest.NewNopHost()))
	var once sync.Once
	shutdown := func() { once.Do(func() { require.NoError(t, proc.Shutdown(context.Background())) }) }
	t.Cleanup(shutdown)
	return &holdingProcessor{Logs: proc, sink: sink, tt: tt, shutdown: shutdown}
}

// send passes records through the processor as one batch.
func (h *holdingProcessor) send(t *testing.T, recs ...*flowrecord.Record) {
	t.Helper()
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for _, r := range recs {
		encode(t, sl, r)
	}
	require.NoError(t, h.ConsumeLogs(context.Background(), ld))
}

// exported decodes every record the sink received, by source address, with
// the resource each came with.
func (h *holdingProcessor) exported(t *testing.T) map[string]flowrecord.Record {
	t.Helper()
	out := map[string]flowrecord.Record{}
	for _, ld := range h.sink.AllLogs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			uid, _ := rl.Resource().Attributes().Get(catalogue.ResourceClusterUID)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				lrs := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					var r flowrecord.Record
					require.NoError(t, attrcodec.Decode(lrs.At(k), &r))
					r.ClusterUID = uid.Str()
					out[r.Source.Address.String()] = r
				}
			}
		}
	}
	return out
}

func (h *holdingProcessor) held(t *testing.T) map[string]int64 {
	t.Helper()
	m, err := h.tt.GetMetric("otelcol_processor_k8s_flow_records_held")
	if err != nil {
		return map[string]int64{}
	}
	out := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		o, _ := dp.Attributes.Value("outcome")
		out[o.AsString()] += dp.Value
	}
	return out
}

// A Pod created without an IP, that gets it after its first connections
// (IPv4 and IPv6), names them; an address no Pod gets is exported unresolved
// when the hold is up; a full hold sheds; shutdown flushes.
func TestHoldUnresolved(t *testing.T) {
	cs := fake.NewClientset(append(clusterObjects(), testPod("default", "late", "uid-late", "node-a", t0, nil))...)
	cfg := nodeConfig("node-a")
	cfg.HoldUnresolved, cfg.HoldMaxRecords = 1500*time.Millisecond, 3
	h := startHolding(t, cfg, func(*Config) (kubernetes.Interface, error) { return cs, nil }, func() time.Time { return t0.Add(time.Hour) })

	const lateV4, lateV6, never, shed = "10.244.1.50", "fd00:10:244:1::50", "10.244.1.51", "10.244.1.52"
	conn := func(src string) *flowrecord.Record {
		return flowCase{reporter: "node-a", src: hp(src, 40000), dst: hp(v4.external, 443)}.record()
	}
	h.send(t, conn(lateV4), issue8260Cases(v4)[0].record(), conn(lateV6), conn(never), conn(shed))
	got := h.exported(t)
	require.Len(t, got, 2, "the resolved record and the shed one pass at once")
	assert.Equal(t, "web-a", got[v4.gwA].Destination.PodName)
	assert.Empty(t, got[shed].Source.PodName)
	assert.Equal(t, flowrecord.EndpointPod, got[shed].Source.Kind)
	assert.Equal(t, map[string]int64{"shed": 1}, h.held(t))

	// The kubelet writes the IPs 1 s later.
	time.Sleep(time.Second)
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), "late", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.PodIP, p.Status.PodIPs = lateV4, []corev1.PodIP{{IP: lateV4}, {IP: lateV6}}
	_, err = cs.CoreV1().Pods("default").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "late IPs resolve the held records", func() bool { return len(h.exported(t)) == 4 })
	got = h.exported(t)
	for _, a := range []string{lateV4, lateV6} {
		assert.Equal(t, "late", got[a].Source.PodName, a)
		assert.Equal(t, "uid-late", got[a].Source.PodUID, a)
		assert.Equal(t, flowrecord.SideSource, got[a].Reporter.Side, a)
		assert.Equal(t, testClusterUID, got[a].ClusterUID, "the held record keeps its resource")
		assert.NotEmpty(t, got[a].Key, a)
	}
	assert.Equal(t, map[string]int64{"resolved": 2, "shed": 1}, h.held(t))

	// An address no Pod gets is exported unresolved when the hold is up, and counted.
	eventually(t, "the hold gives up", func() bool { return len(h.exported(t)) == 5 })
	assert.Empty(t, h.exported(t)[never].Source.PodName)
	assert.Equal(t, map[string]int64{"resolved": 2, "expired": 1, "shed": 1}, h.held(t))
	assert.Equal(t, map[string]int64{reasonUnknownPod: 2}, metricValues(t, h.tt, "otelcol_processor_k8s_flow_addresses_unresolved"))
	assert.Equal(t, map[string]int64{"": 5}, metricValues(t, h.tt, "otelcol_processor_k8s_flow_records_enriched"))

	// Shutdown flushes what is still held.
	const flushed = "10.244.1.53"
	h.send(t, conn(flushed))
	assert.Len(t, h.exported(t), 5, "held")
	h.shutdown()
	require.Contains(t, h.exported(t), flushed)
	assert.Empty(t, h.exported(t)[flushed].Source.PodName)
	assert.Equal(t, map[string]int64{"resolved": 2, "expired": 1, "shed": 1, "shutdown": 1}, h.held(t))
}

// hold_unresolved: 0 exports unresolved records at once, uncounted by the hold.
func TestHoldDisabled(t *testing.T) {
	cs := fake.NewClientset(clusterObjects()...)
	cfg := nodeConfig("node-a")
	cfg.HoldUnresolved = 0
	h := startHolding(t, cfg, func(*Config) (kubernetes.Interface, error) { return cs, nil }, func() time.Time { return t0.Add(time.Hour) })
	h.send(t, flowCase{reporter: "node-a", src: hp("10.244.1.50", 1), dst: hp(v4.external, 2)}.record())
	assert.Len(t, h.exported(t), 1)
	assert.Empty(t, h.held(t))
}
