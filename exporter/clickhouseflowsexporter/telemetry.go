package clickhouseflowsexporter

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/metadata"
)

// Reasons attached to failure counters.
const (
	reasonDecode     = "decode"     // the log record is not a valid flow record
	reasonConnection = "connection" // the server could not be reached or the connection broke
	reasonServer     = "server"     // the server refused the insert (exception)
	reasonTimeout    = "timeout"    // the insert did not finish in time
	reasonSchema     = "schema"     // the table does not match what we write
)

// telemetry is the exporter's own counters (decision D4: every record received,
// written or failed is counted).
type telemetry struct {
	received     metric.Int64Counter
	written      metric.Int64Counter
	failed       metric.Int64Counter
	inserts      metric.Int64Counter
	insertFailed metric.Int64Counter
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	m := set.MeterProvider.Meter(metadata.ScopeName)
	var t telemetry
	var errs [5]error
	t.received, errs[0] = m.Int64Counter("flowtel.clickhouse_flows.records.received",
		metric.WithUnit("{record}"),
		metric.WithDescription("Flow records handed to the exporter by its queue, per insert attempt (a retried batch is counted again)."))
	t.written, errs[1] = m.Int64Counter("flowtel.clickhouse_flows.rows.written",
		metric.WithUnit("{row}"),
		metric.WithDescription("Rows the server confirmed as inserted."))
	t.failed, errs[2] = m.Int64Counter("flowtel.clickhouse_flows.records.failed",
		metric.WithUnit("{record}"),
		metric.WithDescription("Records that cannot be written and are not retried, by reason (decode: not a valid flow record)."))
	t.inserts, errs[3] = m.Int64Counter("flowtel.clickhouse_flows.inserts",
		metric.WithUnit("{insert}"),
		metric.WithDescription("Successful INSERT statements."))
	t.insertFailed, errs[4] = m.Int64Counter("flowtel.clickhouse_flows.rows.insert_failed",
		metric.WithUnit("{row}"),
		metric.WithDescription("Rows of insert attempts that failed, by reason (connection, server, timeout, schema); they are retried per retry_on_failure, and rows still failing when retries are exhausted are counted in otelcol_exporter_send_failed_log_records."))
	return &t, errors.Join(errs[:]...)
}

func reasonAttr(reason string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason)))
}

func (t *telemetry) recordFailed(ctx context.Context, n int, reason string) {
	t.failed.Add(ctx, int64(n), reasonAttr(reason))
}

func (t *telemetry) recordInsertFailed(ctx context.Context, n int, reason string) {
	t.insertFailed.Add(ctx, int64(n), reasonAttr(reason))
}
