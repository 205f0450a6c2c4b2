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

// Reasons a received record is dropped, or an emitted one fails downstream
// (the reason enums of metadata.yaml).
const (
	reasonDecodeError      = "decode_error"
	reasonMissingTimestamp = "missing_timestamp"
	reasonDownstreamPerm   = "downstream_permanent_error"
	reasonDownstreamError  = "downstream_error"
	// reasonDownstreamQueueFull: an exporter's sending queue was full.
	reasonDownstreamQueueFull = "downstream_queue_full"
	reasonRetryExhausted      = "retry_exhausted"
	reasonRetryQueueFull      = "retry_queue_full"
	reasonShutdownUndeliver   = "undeliverable_at_shutdown"
)

// telemetry is the processor's own metrics (metadata.yaml): every record
// received, dropped, emitted or failed is counted (decision D4). pending and
// held are what the two gauges observe.
type telemetry struct {
	*metadata.TelemetryBuilder

	pending atomic.Int64 // halves waiting for their peer
	held    atomic.Int64 // connections held
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	t := &telemetry{TelemetryBuilder: tb}
	observe := func(v *atomic.Int64) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(v.Load())
			return nil
		}
	}
	if err := errors.Join(
		tb.RegisterProcessorFlowCorrelationRecordsPendingCallback(observe(&t.pending)),
		tb.RegisterProcessorFlowCorrelationConnectionsHeldCallback(observe(&t.held)),
	); err != nil {
		tb.Shutdown()
		return nil, err
	}
	return t, nil
}

// withAttribute labels a count with one attribute, as every count of the
// processor is labelled (reason, kind or state).
func withAttribute(key, value string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(key, value)))
}

func withReason(r string) metric.AddOption { return withAttribute("reason", r) }

// Kinds of a late record.
const (
	kindDuplicate = "duplicate"
	kindReordered = "reordered"
	kindReplaced  = "replaced"
	kindReported  = "already_reported"
)

var (
	lateDuplicate = withAttribute("kind", kindDuplicate)
	lateReordered = withAttribute("kind", kindReordered)
	lateReplaced  = withAttribute("kind", kindReplaced)
	lateReported  = withAttribute("kind", kindReported)
)

// stateNone is the state of records that never went through correlation.
const stateNone = "none"

// stateOption labels a count with a correlation state ("none" for records
// that never went through correlation, as in proxy mode).
func stateOption(s flowrecord.CorrelationState) metric.AddOption {
	name := s.String()
	if name == "" {
		name = stateNone
	}
	return withAttribute("state", name)
}
