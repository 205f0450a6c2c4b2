package flowcorrelationprocessor

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/internal/flowrecord"

	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

const metricPrefix = "flowtel.flow_correlation."

// Reasons a received record is dropped, or an emitted one fails downstream.
const (
	reasonDecodeError       = "decode_error"
	reasonMissingTimestamp  = "missing_timestamp"
	reasonDownstreamPerm    = "downstream_permanent_error"
	reasonDownstreamError   = "downstream_error"
	reasonRetryExhausted    = "retry_exhausted"
	reasonRetryQueueFull    = "retry_queue_full"
	reasonShutdownUndeliver = "undeliverable_at_shutdown"
)

// telemetry is the processor's own metrics: every record received, dropped,
// emitted or failed is counted (decision D4).
type telemetry struct {
	received      metric.Int64Counter
	dropped       metric.Int64Counter
	emitted       metric.Int64Counter
	failed        metric.Int64Counter
	retried       metric.Int64Counter
	relayFolded   metric.Int64Counter
	pairs         metric.Int64Counter
	unpaired      metric.Int64Counter
	earlyExported metric.Int64Counter
	late          metric.Int64Counter
	replaced      metric.Int64Counter
	timeToPair    metric.Float64Histogram

	pending atomic.Int64 // halves waiting for their peer
	held    atomic.Int64 // connections held
	reg     metric.Registration
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	m := set.MeterProvider.Meter(metadata.ScopeName)
	t := &telemetry{}
	var errs, err error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(metricPrefix+name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	t.received = counter("records.received", "{record}", "Flow records received.")
	t.dropped = counter("records.dropped", "{record}", "Received flow records dropped because they cannot be used, by reason.")
	t.emitted = counter("records.emitted", "{record}", "Flow records accepted by the next consumer, by correlation state.")
	t.failed = counter("records.failed", "{record}", "Flow records the next consumer did not accept and that were given up, by reason.")
	t.retried = counter("records.retried", "{record}", "Flow records the next consumer refused with a retryable error, queued for a retry.")
	t.relayFolded = counter("records.relay_folded", "{record}", "Exports not made for relay legs (a NodePort's Node forwarding to a third Node) and the endpoint Node's halves they pair with: the connection is exported under its first leg's key. By export reason.")
	t.pairs = counter("pairs", "{pair}", "Connections whose two halves were paired.")
	t.unpaired = counter("records.unpaired", "{record}", "Halves exported without a peer, by reason (pairing_timeout, evicted, flush, replaced).")
	t.earlyExported = counter("records.early_exported", "{record}", "Records exported before their deadline because max_records was reached.")
	t.late = counter("records.late", "{record}", "Records that arrive late, by kind: not newer than the last one of their side (duplicate: ignored; reordered: its counts exported once), or of a connection a newer one on the same tuple replaced (replaced: dropped).")
	t.replaced = counter("connections.replaced", "{connection}", "Held connections finished because a record of a newer connection on the same tuple (a later start from the same Node) arrived; what they had not exported goes out with reason replaced.")
	t.timeToPair, errs = m.Float64Histogram(metricPrefix+"pairing.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a half waited for its peer."),
		metric.WithExplicitBucketBoundaries(0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 180, 300))
	err = errors.Join(err, errs)

	pending, e1 := m.Int64ObservableGauge(metricPrefix+"records.pending", metric.WithUnit("{record}"),
		metric.WithDescription("Halves held waiting for their peer."))
	held, e2 := m.Int64ObservableGauge(metricPrefix+"connections.held", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections held (pending halves, and pairs or single records until their inactive timeout)."))
	err = errors.Join(err, e1, e2)
	if err != nil {
		return nil, err
	}
	t.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(pending, t.pending.Load())
		o.ObserveInt64(held, t.held.Load())
		return nil
	}, pending, held)
	return t, err
}

func (t *telemetry) shutdown() error {
	if t.reg == nil {
		return nil
	}
	return t.reg.Unregister()
}

func withReason(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

// Kinds of a late record.
var (
	lateDuplicate = metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", "duplicate")))
	lateReordered = metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", "reordered")))
	lateReplaced  = metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", "replaced")))
)

func withState(s string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("state", s)))
}

// stateOption labels a count with a correlation state ("none" for records
// that never went through correlation, as in proxy mode).
func stateOption(s flowrecord.CorrelationState) metric.AddOption {
	name := s.String()
	if name == "" {
		name = "none"
	}
	return withState(name)
}
