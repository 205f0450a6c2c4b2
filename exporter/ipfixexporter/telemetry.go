package ipfixexporter

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
)

// Reasons a record is counted as failed or lost (the reason enums of metadata.yaml).
const (
	reasonDecode         = "decode"          // not a valid flow record
	reasonEncode         = "encode"          // a value the layout cannot hold (string > 65535 bytes, address family)
	reasonTooLarge       = "too_large"       // larger than one message
	reasonConnectionLost = "connection_lost" // written to a connection that died before the collector acknowledged it
)

// telemetry is the exporter's own counters (metadata.yaml; decision D4: every
// record received is sent, failed with a reason, or handed back to the
// sending queue).
type telemetry struct {
	*metadata.TelemetryBuilder
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	return &telemetry{tb}, err
}

// Results of a connection attempt.
const (
	resultOKValue     = "ok"
	resultFailedValue = "failed"
)

var (
	resultOK     = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", resultOKValue)))
	resultFailed = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", resultFailedValue)))
)

func withReason(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

// fail counts n records that cannot be exported, with the reason.
func (t *telemetry) fail(ctx context.Context, reason string, n int64) {
	if n > 0 {
		t.ExporterIpfixRecordsFailed.Add(ctx, n, withReason(reason))
	}
}
