package flowcorrelationprocessor

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock drives the processor's timers from the test. Its ticker channel
// is unbuffered: tick returns once the timer goroutine has taken the tick,
// and sending a second one means the first has been fully handled.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	ch  chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0, ch: make(chan time.Time)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}
func (f *fakeClock) NewTicker(time.Duration) ticker { return f }
func (f *fakeClock) C() <-chan time.Time            { return f.ch }
func (f *fakeClock) Stop()                          {}

// advance moves time on by d and waits until the timer goroutine has handled it.
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	n := f.now
	f.mu.Unlock()
	f.ch <- n
	f.ch <- n
}

// interNode returns the two halves of a Pod-to-Pod connection between
// node-a and node-b, ending at end with the given totals.
func interNode(i int, end time.Time, srcOctets, dstOctets uint64) (src, dst *flowrecord.Record) {
	mk := func() *flowrecord.Record {
		return &flowrecord.Record{
			Start: t0, End: end, Protocol: 6, FlowType: flowrecord.FlowTypeInterNode,
			Source:      flowrecord.Endpoint{Address: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: uint16(30000 + i%30000), Kind: flowrecord.EndpointPod},
			Destination: flowrecord.Endpoint{Address: netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), Port: 8080, Kind: flowrecord.EndpointPod},
		}
	}
	src, dst = mk(), mk()
	src.Source.PodName, src.Source.Namespace, src.Source.NodeName = "client", "shop", "node-a"
	src.Reporter = flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource}
	src.Stats = flowrecord.Counters{PacketTotal: srcOctets / 100, OctetTotal: srcOctets}
	dst.Destination.PodName, dst.Destination.Namespace, dst.Destination.NodeName = "server", "shop", "node-b"
	dst.Reporter = flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination}
	dst.Stats = flowrecord.Counters{PacketTotal: dstOctets / 100, OctetTotal: dstOctets}
	src.Key = src.CorrelationKey()
	dst.Key = dst.CorrelationKey()
	return src, dst
}

// logsOf encodes records as the node collectors send them.
func logsOf(recs ...*flowrecord.Record) plog.Logs { return encodedLogs(attrcodec.Encode, recs...) }

// encodedLogs is logsOf in the encoding encode writes.
func encodedLogs(encode func(*flowrecord.Record, plog.LogRecord), recs ...*flowrecord.Record) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("k8s.node.name", "node-x")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range recs {
		encode(r, lrs.AppendEmpty())
	}
	return ld
}

// decodeAllLogs decodes every record of every batch, failing the test on error.
func decodeAllLogs(t testing.TB, batches []plog.Logs) []flowrecord.Record {
	t.Helper()
	var out []flowrecord.Record
	for _, ld := range batches {
		rls := ld.ResourceLogs()
		for i := range rls.Len() {
			sls := rls.At(i).ScopeLogs()
			for j := range sls.Len() {
				lrs := sls.At(j).LogRecords()
				for k := range lrs.Len() {
					var r flowrecord.Record
					require.NoError(t, attrcodec.Decode(lrs.At(k), &r))
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// metricPrefix starts the name of every metric of metadata.yaml, as the
// collector exports it.
const metricPrefix = "otelcol_processor_flow_correlation_"

type harness struct {
	p     *flowProcessor
	clock *fakeClock
	tel   *componenttest.Telemetry
}

func newHarness(t *testing.T, cfg *Config, next consumer.Logs) *harness {
	t.Helper()
	tel := componenttest.NewTelemetry()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	clk := newFakeClock()
	p, err := newProcessor(set, cfg, next, clk)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	h := &harness{p: p, clock: clk, tel: tel}
	t.Cleanup(func() {
		require.NoError(t, p.Shutdown(context.Background()))
		require.NoError(t, tel.Shutdown(context.Background()))
	})
	return h
}

// sum returns the value of an int counter or gauge for the data point whose
// attributes include want (all points when want is empty).
func (h *harness) sum(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, err := h.tel.GetMetric(metricPrefix + name)
	if err != nil {
		return 0
	}
	var pts []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		pts = d.DataPoints
	case metricdata.Gauge[int64]:
		pts = d.DataPoints
	default:
		t.Fatalf("%s: unexpected data type %T", name, m.Data)
	}
	var n int64
	for _, p := range pts {
		match := true
		for _, kv := range want {
			if v, ok := p.Attributes.Value(kv.Key); !ok || v != kv.Value {
				match = false
			}
		}
		if match {
			n += p.Value
		}
	}
	return n
}

func aggregateConfig() *Config {
	c := createDefaultConfig().(*Config)
	return c
}
