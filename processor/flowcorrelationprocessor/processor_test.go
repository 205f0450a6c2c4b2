package flowcorrelationprocessor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/aggregate"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

var ctx = context.Background()

func state(s string) attribute.KeyValue  { return attribute.String("state", s) }
func reason(s string) attribute.KeyValue { return attribute.String("reason", s) }

func TestAggregatePairsAndEmitsAtOnce(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	src, dst := interNode(1, t0.Add(5*time.Second), 1000, 1010)

	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src)))
	assert.Zero(t, sink.LogRecordCount(), "the first half waits for its peer")
	assert.EqualValues(t, 1, h.sum(t, "records_pending"))

	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(dst)))
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 1, "the pair is emitted as soon as it is complete, not at the next tick")
	r := got[0]
	assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation)
	assert.Equal(t, "client", r.Source.PodName)
	assert.Equal(t, "server", r.Destination.PodName)
	require.NotNil(t, r.Aggregation)
	assert.Equal(t, uint64(1000), r.Aggregation.StatsFromSource.OctetTotal)
	assert.Equal(t, uint64(1010), r.Aggregation.StatsFromDestination.OctetTotal)
	assert.Equal(t, src.Key, r.Key)
	assert.Equal(t, flowrecord.KeyHash(src.Key), sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).TraceID())
	assert.Equal(t, metadata.ScopeName, sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).Scope().Name())

	assert.EqualValues(t, 2, h.sum(t, "records_received"))
	assert.EqualValues(t, 1, h.sum(t, "pairs"))
	assert.EqualValues(t, 1, h.sum(t, "records_emitted", state("paired")))
	assert.EqualValues(t, 0, h.sum(t, "records_pending"))
	assert.EqualValues(t, 1, h.sum(t, "connections_held"))
	m, err := h.tel.GetMetric(metricPrefix + "pairing_duration")
	require.NoError(t, err)
	assert.Equal(t, "s", m.Unit)
}

func TestTimersRunInTheProcessorsGoroutine(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	src, _ := interNode(1, t0, 1000, 0)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src)))

	h.clock.advance(179 * time.Second)
	assert.Zero(t, sink.LogRecordCount(), "within the pairing timeout (3 × 60 s)")
	h.clock.advance(time.Second)
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 1)
	assert.Equal(t, flowrecord.CorrelationUnpaired, got[0].Correlation)
	assert.False(t, got[0].Evicted)
	assert.EqualValues(t, 1, h.sum(t, "records_unpaired", reason("pairing_timeout")))
	assert.EqualValues(t, 1, h.sum(t, "records_emitted", state("unpaired")))
	assert.EqualValues(t, 0, h.sum(t, "connections_held"))
}

func TestActiveTimeoutReexportsOnlyNewData(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src, dst)))
	require.Equal(t, 1, sink.LogRecordCount())

	src2, dst2 := interNode(1, t0.Add(10*time.Second), 2000, 2050)
	h.clock.advance(10 * time.Second)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src2, dst2)))
	h.clock.advance(50 * time.Second) // active timeout of the pair's first export
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 2)
	assert.Equal(t, uint64(888), got[1].Aggregation.ThroughputFromSource)
	assert.Equal(t, uint64(915), got[1].Aggregation.ThroughputFromDestination)

	h.clock.advance(60 * time.Second)
	assert.Equal(t, 2, sink.LogRecordCount(), "no new data: no re-export")
}

func TestUndecodableRecordIsDroppedAloneAndCounted(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(ctx)) }()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	sink := &consumertest.LogsSink{}
	p, err := newProcessor(set, aggregateConfig(), sink, newFakeClock())
	require.NoError(t, err)
	h := &harness{p: p, tel: tel}

	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	ld := logsOf(src)
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	bad := lrs.AppendEmpty()
	attrcodec.Encode(src, bad)
	bad.Attributes().PutStr("source.port", "http") // wrong type
	noAddr := lrs.AppendEmpty()
	attrcodec.Encode(src, noAddr)
	noAddr.Attributes().Remove(catalogue.AttrDestinationAddress)
	noTime := lrs.AppendEmpty()
	attrcodec.Encode(src, noTime)
	noTime.SetTimestamp(0)
	attrcodec.Encode(dst, lrs.AppendEmpty())

	require.NoError(t, p.ConsumeLogs(ctx, ld))
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 1, "the good records of the batch still pair")
	assert.Equal(t, flowrecord.CorrelationPaired, got[0].Correlation)
	assert.EqualValues(t, 5, h.sum(t, "records_received"))
	assert.EqualValues(t, 2, h.sum(t, "records_dropped", reason("decode_error")))
	assert.EqualValues(t, 1, h.sum(t, "records_dropped", reason("missing_timestamp")))

	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message+": "+e.ContextMap()["error"].(string))
		if len(msgs) == 2 {
			break
		}
	}
	require.Len(t, msgs, 2)
	assert.Contains(t, msgs[0], `"source.port"`)
	assert.Contains(t, msgs[1], `"destination.address"`)
	require.NoError(t, p.Shutdown(ctx))
}

// flaky refuses the first `failures` batches with err, then accepts.
type flaky struct {
	consumertest.LogsSink
	mu       sync.Mutex
	failures int
	err      error
	calls    int
}

func (f *flaky) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	f.mu.Lock()
	f.calls++
	if f.failures != 0 {
		f.failures--
		f.mu.Unlock()
		return f.err
	}
	f.mu.Unlock()
	return f.LogsSink.ConsumeLogs(ctx, ld)
}

func TestRetryableDownstreamErrorIsRetried(t *testing.T) {
	next := &flaky{failures: 2, err: errors.New("backend unavailable")}
	h := newHarness(t, aggregateConfig(), next)
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src, dst)), "the data is held by the processor, not handed back")
	assert.Zero(t, next.LogRecordCount())
	assert.EqualValues(t, 1, h.sum(t, "records_retried"))

	h.clock.advance(time.Second) // first retry: refused again, backoff doubles
	assert.Zero(t, next.LogRecordCount())
	h.clock.advance(time.Second) // not due yet
	assert.Zero(t, next.LogRecordCount())
	h.clock.advance(time.Second)
	got := decodeAllLogs(t, next.AllLogs())
	require.Len(t, got, 1)
	assert.Equal(t, flowrecord.CorrelationPaired, got[0].Correlation)
	assert.EqualValues(t, 1, h.sum(t, "records_emitted", state("paired")))
	assert.EqualValues(t, 0, h.sum(t, "records_failed"))
}

func TestRetriesGiveUpCounted(t *testing.T) {
	next := &flaky{failures: -1, err: errors.New("backend unavailable")}
	h := newHarness(t, aggregateConfig(), next)
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src, dst)))
	for range 12 {
		h.clock.advance(30 * time.Second)
	}
	assert.EqualValues(t, 1, h.sum(t, "records_failed", reason("retry_exhausted")))
	assert.Zero(t, h.p.out.waiting())
}

func TestPermanentDownstreamErrorIsCounted(t *testing.T) {
	next := &flaky{failures: 1, err: consumererror.NewPermanent(errors.New("schema rejected"))}
	h := newHarness(t, aggregateConfig(), next)
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src, dst)))
	assert.EqualValues(t, 1, h.sum(t, "records_failed", reason("downstream_permanent_error")))
	assert.Zero(t, h.p.out.waiting(), "a permanent error is not retried")
}

// fanOut hands each batch to every consumer and reports their errors as one,
// as the collector does for a pipeline with several exporters.
type fanOut []consumer.Logs

func (f fanOut) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f fanOut) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	var errs []error
	for _, c := range f {
		errs = append(errs, c.ConsumeLogs(ctx, ld))
	}
	return errors.Join(errs...)
}

// TestFullQueueBehindFanOutIsNotSentTwice: one exporter's full sending queue
// costs that exporter the batch (counted), not every other exporter a second
// copy. Retried, the batch reached the exporter that had taken it once per
// attempt.
func TestFullQueueBehindFanOutIsNotSentTwice(t *testing.T) {
	took := &consumertest.LogsSink{}
	full := &flaky{failures: -1, err: fmt.Errorf("exporter ipfix: %w", exporterhelper.ErrQueueIsFull)}
	h := newHarness(t, aggregateConfig(), fanOut{took, full})
	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src, dst)))
	for range 4 {
		h.clock.advance(2 * time.Second)
	}
	assert.Equal(t, 1, took.LogRecordCount(), "the exporter that took the record got it once")
	assert.Equal(t, 1, full.calls, "the full queue is not asked again")
	assert.EqualValues(t, 1, h.sum(t, "records_failed", reason("downstream_queue_full")))
	assert.EqualValues(t, 0, h.sum(t, "records_retried"))
	assert.Zero(t, h.p.out.waiting())
}

func TestShutdownExportsEverythingHeld(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	var halves []*flowrecord.Record
	for i := range 3 {
		src, _ := interNode(i, t0.Add(time.Second), 1000, 0)
		halves = append(halves, src)
	}
	single, _ := interNode(10, t0.Add(time.Second), 1000, 0)
	single.FlowType, single.Reporter.Side = flowrecord.FlowTypeIntraNode, flowrecord.SideBoth
	halves = append(halves, single)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(halves...)))
	require.Equal(t, 1, sink.LogRecordCount(), "only the intra-Node record is ready")
	// An update to the intra-Node connection is unreported data too.
	single2 := *single
	single2.End, single2.Stats.OctetTotal = t0.Add(2*time.Second), 1500
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(&single2)))

	require.NoError(t, h.p.Shutdown(ctx))
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 5)
	var unpaired int
	for _, r := range got[1:] {
		if r.Correlation == flowrecord.CorrelationUnpaired {
			unpaired++
		}
	}
	assert.Equal(t, 3, unpaired)
	assert.EqualValues(t, 3, h.sum(t, "records_unpaired", reason("flush")))
}

func TestShutdownCountsWhatCannotBeDelivered(t *testing.T) {
	next := &flaky{failures: -1, err: errors.New("backend unavailable")}
	h := newHarness(t, aggregateConfig(), next)
	src, _ := interNode(1, t0.Add(time.Second), 1000, 0)
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src)))
	require.NoError(t, h.p.Shutdown(ctx))
	assert.EqualValues(t, 1, h.sum(t, "records_failed", reason("undeliverable_at_shutdown")))
}

func TestMaxRecordsExportsEarly(t *testing.T) {
	cfg := aggregateConfig()
	cfg.MaxRecords = 2
	sink := &consumertest.LogsSink{}
	h := newHarness(t, cfg, sink)
	for i := range 3 {
		src, _ := interNode(i, t0.Add(time.Second), 1000, 0)
		require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src)))
	}
	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 1)
	assert.True(t, got[0].Evicted)
	assert.Equal(t, flowrecord.CorrelationUnpaired, got[0].Correlation)
	assert.EqualValues(t, 1, h.sum(t, "records_early_exported"))
	assert.EqualValues(t, 2, h.sum(t, "records_pending"))
}

func TestProxyMode(t *testing.T) {
	cfg := aggregateConfig()
	cfg.Mode = ModeProxy
	sink := &consumertest.LogsSink{}
	h := newHarness(t, cfg, sink)

	src, dst := interNode(1, t0.Add(time.Second), 1000, 1020)
	toExt, _ := interNode(2, t0.Add(time.Second), 1, 0)
	toExt.FlowType = flowrecord.FlowTypeToExternal
	toExt.Destination = flowrecord.Endpoint{Address: netip.MustParseAddr("8.8.8.8"), Port: 53, Kind: flowrecord.EndpointExternal}
	fromExt, _ := interNode(3, t0.Add(time.Second), 1, 0)
	fromExt.FlowType = flowrecord.FlowTypeFromExternal
	fromExt.Source = flowrecord.Endpoint{Address: netip.MustParseAddr("203.0.113.9"), Port: 40000, Kind: flowrecord.EndpointExternal}
	fromExt.Destination.PodName = "server"
	intra, _ := interNode(4, t0.Add(time.Second), 1, 0)
	intra.FlowType, intra.Reporter.Side = flowrecord.FlowTypeIntraNode, flowrecord.SideBoth
	hostSrc, _ := interNode(5, t0.Add(time.Second), 1, 0) // a Node source, no Side: Pod-name predicates cannot tell
	hostSrc.Source = flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.254"), Port: 33000, Kind: flowrecord.EndpointNode}
	hostSrc.Reporter = flowrecord.Reporter{}
	withOrigin, _ := interNode(6, t0.Add(time.Second), 1, 0)
	withOrigin.Origin = flowrecord.Origin{ObservationDomainID: 7, ExporterAddress: netip.MustParseAddr("192.0.2.7")}

	ld := logsOf(src, dst, toExt, fromExt, intra, hostSrc, withOrigin)
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty().Attributes().PutStr("source.address", "not-an-ip")
	peerCtx := client.NewContext(ctx, client.Info{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 51234}})
	require.NoError(t, h.p.ConsumeLogs(peerCtx, ld))

	got := decodeAllLogs(t, sink.AllLogs())
	require.Len(t, got, 7, "the bad record is dropped alone")
	want := []flowrecord.Direction{flowrecord.DirectionEgress, flowrecord.DirectionIngress, flowrecord.DirectionEgress,
		flowrecord.DirectionIngress, flowrecord.DirectionUnknown, flowrecord.DirectionUnknown, flowrecord.DirectionEgress}
	for i, r := range got {
		assert.Equal(t, want[i], r.Direction, "record %d", i)
		assert.Nil(t, r.Aggregation, "proxy mode does not aggregate")
		assert.Equal(t, flowrecord.CorrelationNone, r.Correlation)
	}
	assert.Equal(t, netip.MustParseAddr("192.0.2.10"), got[0].Origin.ExporterAddress, "the sending collector is the original exporter")
	assert.Equal(t, flowrecord.Origin{ObservationDomainID: 7, ExporterAddress: netip.MustParseAddr("192.0.2.7")}, got[6].Origin,
		"an original exporter already named is kept")
	assert.Equal(t, "node-x", sink.AllLogs()[0].ResourceLogs().At(0).Resource().Attributes().AsRaw()["k8s.node.name"], "resource kept")
	assert.EqualValues(t, 8, h.sum(t, "records_received"))
	assert.EqualValues(t, 1, h.sum(t, "records_dropped", reason("decode_error")))
	assert.EqualValues(t, 7, h.sum(t, "records_emitted", state("none")))

	// Stateless: a downstream error goes back to the sender, counted.
	h2 := newHarness(t, cfg, consumertest.NewErr(errors.New("down")))
	require.Error(t, h2.p.ConsumeLogs(ctx, logsOf(src)))
	assert.EqualValues(t, 1, h2.sum(t, "records_failed", reason("downstream_error")))
}

// A duplicate and a reordered export are counted by kind (nothing is set
// aside without a counter); the reordered one's counts are exported.
func TestLateRecordsAreCounted(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	src1, dst1 := interNode(1, t0.Add(5*time.Second), 1000, 1010)
	src2, _ := interNode(1, t0.Add(10*time.Second), 3000, 0)
	src1.Stats.OctetDelta, dst1.Stats.OctetDelta, src2.Stats.OctetDelta = 1000, 1010, 2000
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(src2, dst1, dst1, src1)))
	h.clock.advance(time.Hour)
	got := decodeAllLogs(t, sink.AllLogs())
	var sum uint64
	for _, r := range got {
		sum += r.Aggregation.StatsFromSource.OctetDelta
	}
	assert.Equal(t, uint64(3000), sum, "the source's deltas add up to its total")
	assert.EqualValues(t, 1, h.sum(t, "records_late", attribute.String("kind", "duplicate")))
	assert.EqualValues(t, 1, h.sum(t, "records_late", attribute.String("kind", "reordered")))
}

// A tuple reused by a new connection: the held one is finished and
// counted, the new one is a record chain of its own, and a late export of
// the replaced one is dropped, counted (internal/aggregate/reuse.go).
func TestTupleReuseIsCounted(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	oldSrc, oldDst := interNode(1, t0.Add(5*time.Second), 5000, 5000)
	oldSrc.Stats.OctetDelta, oldDst.Stats.OctetDelta = 5000, 5000
	newSrc, newDst := interNode(1, t0.Add(40*time.Second), 300, 300)
	newSrc.Start, newDst.Start = t0.Add(30*time.Second), t0.Add(31*time.Second)
	newSrc.Stats.OctetDelta, newDst.Stats.OctetDelta = 300, 300
	require.NoError(t, h.p.ConsumeLogs(ctx, logsOf(oldSrc, oldDst, newSrc, oldDst, newDst)))
	h.clock.advance(time.Hour)
	got := decodeAllLogs(t, sink.AllLogs())
	sums := map[time.Time]uint64{}
	for _, r := range got {
		sums[r.Start] += r.Stats.OctetDelta
	}
	assert.Equal(t, map[time.Time]uint64{t0: 5000, newSrc.Start: 300}, sums, "each connection's deltas add up to its own total")
	assert.EqualValues(t, 1, h.sum(t, "connections_replaced"))
	assert.EqualValues(t, 1, h.sum(t, "records_late", attribute.String("kind", "replaced")))
}

func mapID(m map[string]string) uintptr { return uintptr(reflect.ValueOf(m).UnsafePointer()) }

// The label maps of forgotten connections are what the next records are
// decoded into, each holding its own record's labels only.
func TestDecodeBufferReusesForgottenLabelMaps(t *testing.T) {
	for _, enc := range []struct {
		name   string
		encode func(*flowrecord.Record, plog.LogRecord)
	}{{"attributes", attrcodec.Encode}, {"compact", compactcodec.Encode}} {
		t.Run(enc.name, func(t *testing.T) {
			tbl := aggregate.New(aggregate.Settings{ActiveTimeout: time.Minute, InactiveTimeout: time.Minute, PairingTimeout: time.Minute, RecycleLabels: true})
			emit := func(*flowrecord.Record, aggregate.Reason) {}
			old := map[uintptr]bool{}
			for i := range 5 {
				src, dst := realisticHalves(i)
				src.Source.PodLabels["extra"] = "a label the next records do not have"
				old[mapID(src.Source.PodLabels)], old[mapID(dst.Destination.PodLabels)] = true, true
				tbl.Add(src, t0, emit)
				tbl.Add(dst, t0, emit)
			}
			tbl.Expire(t0.Add(time.Hour), emit) // all forgotten
			buf := newDecodeBuffer().(*decodeBuffer)
			buf.refill(tbl, 5)
			require.Len(t, buf.labels, 10, "two maps a connection")

			reused := 0
			for i := range 4 {
				src, dst := realisticHalves(100 + i)
				src.Source.PodLabels = map[string]string{"k": fmt.Sprint(i)}
				dst.Destination.PodLabels = nil
				dst.Source.PodLabels = map[string]string{"seen-by": "dst"}
				for _, in := range []*flowrecord.Record{src, dst} {
					ld := encodedLogs(enc.encode, in)
					var r flowrecord.Record
					buf.lend(&r)
					require.NoError(t, buf.dec.Decode(ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0), &r))
					buf.settle(&r)
					assert.Equal(t, in.Source.PodLabels, r.Source.PodLabels)
					assert.Equal(t, in.Destination.PodLabels, r.Destination.PodLabels)
					for _, m := range []map[string]string{r.Source.PodLabels, r.Destination.PodLabels} {
						if m != nil && old[mapID(m)] {
							reused++
						}
					}
				}
			}
			// (one more is lent: the decoder holds it for destination labels.)
			assert.Equal(t, 8, reused, "every record's labels are decoded into a recycled map")
			assert.Len(t, buf.labels, 1)
		})
	}
}

// Through the processor: connections forgotten, their maps recycled, and the
// next connections' exports (the first, and the last after an update)
// carry exactly their own labels.
func TestRecycledLabelMapsCarryOnlyTheirOwnLabels(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	round := func(first int, labels func(i int) (src, dst map[string]string)) {
		sink.Reset()
		var srcs, dsts, updates []*flowrecord.Record
		want := map[string][2]map[string]string{}
		for i := first; i < first+10; i++ {
			s, d := realisticHalves(i)
			s.Source.PodLabels, d.Destination.PodLabels = labels(i)
			u := *s
			u.End, u.Stats.OctetTotal, u.Stats.OctetDelta = u.End.Add(time.Second), u.Stats.OctetTotal+100, 100
			srcs, dsts, updates = append(srcs, s), append(dsts, d), append(updates, &u)
			want[s.Key] = [2]map[string]string{s.Source.PodLabels, d.Destination.PodLabels}
		}
		// One record a batch, so later ones decode into maps earlier batches took back.
		for _, r := range slices.Concat(srcs, dsts, updates) {
			require.NoError(t, h.p.ConsumeLogs(ctx, encodedLogs(compactcodec.Encode, r)))
		}
		h.clock.advance(time.Hour) // every connection exported once more and forgotten
		got := decodeAllLogs(t, sink.AllLogs())
		require.Len(t, got, 20)
		for _, r := range got {
			w := want[r.Key]
			assert.Equal(t, w[0], r.Source.PodLabels, r.Key)
			assert.Equal(t, w[1], r.Destination.PodLabels, r.Key)
		}
	}
	round(0, func(i int) (map[string]string, map[string]string) {
		return map[string]string{"app": "web", "tier": "front", "n": fmt.Sprint(i)}, map[string]string{"app": "api", "x": "y"}
	})
	round(1000, func(i int) (map[string]string, map[string]string) {
		return map[string]string{"only": fmt.Sprint(i)}, nil
	})
	round(2000, func(i int) (map[string]string, map[string]string) {
		return nil, map[string]string{"dst": fmt.Sprint(i)}
	})
	round(3000, func(i int) (map[string]string, map[string]string) {
		return map[string]string{"a": fmt.Sprint(i)}, map[string]string{"b": fmt.Sprint(i)}
	})
}

// Concurrent batches (as several receivers' goroutines deliver them) take
// and give back label maps through the table: each export still carries
// its own connection's labels (run with -race).
func TestConcurrentBatchesRecycleLabelsSafely(t *testing.T) {
	sink := &consumertest.LogsSink{}
	h := newHarness(t, aggregateConfig(), sink)
	const workers, perWorker = 4, 25
	for round := range 3 {
		sink.Reset()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					n := round*10000 + w*1000 + i
					s, d := realisticHalves(n)
					s.Source.PodLabels = map[string]string{"conn": fmt.Sprint(n)}
					d.Destination.PodLabels = map[string]string{"conn": fmt.Sprint(n), "side": "dst"}
					for _, r := range []*flowrecord.Record{s, d} {
						assert.NoError(t, h.p.ConsumeLogs(ctx, encodedLogs(compactcodec.Encode, r)))
					}
				}
			}()
		}
		wg.Wait()
		got := decodeAllLogs(t, sink.AllLogs())
		require.Len(t, got, workers*perWorker)
		for _, r := range got {
			conn := r.Source.PodLabels["conn"]
			assert.Equal(t, map[string]string{"conn": conn}, r.Source.PodLabels)
			assert.Equal(t, map[string]string{"conn": conn, "side": "dst"}, r.Destination.PodLabels)
			assert.Equal(t, fmt.Sprintf("web-7d9f-%05s", conn), r.Source.PodName, "the labels are the record's own connection's")
		}
		h.clock.advance(time.Hour) // all forgotten: their maps go back to the table
	}
}

// decodeAll keeps every record it decodes (the table holds them), so records
// that carry an Aggregation (relayed between gateways) each keep their own:
// the Decoder it uses lends a spare Aggregation only to a record that had one
// before, and decodeAll decodes into fresh records.
func TestDecodeAllKeepsEachAggregation(t *testing.T) {
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), aggregateConfig(), consumertest.NewNop(), newFakeClock())
	require.NoError(t, err)
	defer func() { _ = p.Shutdown(ctx) }()
	for _, enc := range []struct {
		name   string
		encode func(*flowrecord.Record, plog.LogRecord)
	}{{"attributes", attrcodec.Encode}, {"compact", compactcodec.Encode}} {
		t.Run(enc.name, func(t *testing.T) {
			batch := func(b int) []*flowrecord.Record {
				var in []*flowrecord.Record
				for i := range 4 {
					r, _ := realisticHalves(i)
					r.Aggregation = &flowrecord.Aggregation{Throughput: uint64(1000*b + i), StatsFromSource: flowrecord.Counters{PacketTotal: uint64(10*b + i)}}
					in = append(in, r)
				}
				return in
			}
			buf := newDecodeBuffer().(*decodeBuffer)
			var held []flowrecord.Record // what the table keeps: the records as decoded
			var want []flowrecord.Aggregation
			for b := range 3 { // the buffer is reused batch after batch
				in := batch(b + 1)
				recs, _ := p.decodeAll(encodedLogs(enc.encode, in...), buf)
				require.Len(t, recs, len(in))
				for i, r := range recs {
					require.NotNil(t, r.Aggregation, "record %d", i)
					assert.Equal(t, *in[i].Aggregation, *r.Aggregation, "record %d", i)
					held, want = append(held, r), append(want, *in[i].Aggregation)
				}
				buf.recs = recs[:0]
			}
			for i, r := range held {
				assert.Equal(t, want[i], *r.Aggregation, "record %d, after the batches that followed it", i)
				for j := range i {
					assert.NotSame(t, held[j].Aggregation, r.Aggregation, "records %d and %d share an Aggregation", j, i)
				}
			}
		})
	}
}
