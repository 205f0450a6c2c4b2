package clickhouseflowsexporter

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/metadata"
)

// Reasons attached to failure counters (the reason enums of metadata.yaml).
const (
	reasonDecode     = "decode"     // the log record is not a valid flow record
	reasonConnection = "connection" // the server could not be reached or the connection broke
	reasonServer     = "server"     // the server refused the insert (exception)
	reasonTimeout    = "timeout"    // the insert did not finish in time
	reasonSchema     = "schema"     // the table does not match what we write
)

// telemetry is the exporter's own counters (metadata.yaml; decision D4: every
// record received, written or failed is counted).
type telemetry struct {
	*metadata.TelemetryBuilder
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	return &telemetry{tb}, err
}

func reasonAttr(reason string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason)))
}

func (t *telemetry) recordFailed(ctx context.Context, n int, reason string) {
	t.ExporterClickhouseFlowsRecordsFailed.Add(ctx, int64(n), reasonAttr(reason))
}

func (t *telemetry) recordInsertFailed(ctx context.Context, n int, reason string) {
	t.ExporterClickhouseFlowsRowsInsertFailed.Add(ctx, int64(n), reasonAttr(reason))
}
