package ipfixexporter

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
)

// Reasons a record is counted as failed or lost.
const (
	reasonDecode         = "decode"          // not a valid flow record
	reasonEncode         = "encode"          // a value the layout cannot hold (string > 65535 bytes, address family)
	reasonTooLarge       = "too_large"       // larger than one message
	reasonConnectionLost = "connection_lost" // written to a connection that died before the collector acknowledged it
)

// telemetry is the exporter's own counters (decision D4: every record received
// is sent, failed with a reason, or handed back to the sending queue).
type telemetry struct {
	received    metric.Int64Counter
	sent        metric.Int64Counter
	failed      metric.Int64Counter
	lost        metric.Int64Counter
	requeued    metric.Int64Counter
	resent      metric.Int64Counter
	messages    metric.Int64Counter
	templates   metric.Int64Counter
	bytes       metric.Int64Counter
	connections metric.Int64Counter
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	m := mp.Meter(metadata.ScopeName)
	t := &telemetry{}
	var err error
	counter := func(dst *metric.Int64Counter, name, unit, desc string) {
		if err != nil {
			return
		}
		*dst, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	}
	counter(&t.received, "flowtel.ipfix.records.received", "{record}", "Flow records given to the exporter.")
	counter(&t.sent, "flowtel.ipfix.records.sent", "{record}", "Flow records written to the collector.")
	counter(&t.failed, "flowtel.ipfix.records.failed", "{record}", "Flow records dropped because they cannot be exported, by reason.")
	counter(&t.lost, "flowtel.ipfix.records.lost", "{record}", "Flow records written to a connection that failed before the collector acknowledged them, by reason.")
	counter(&t.requeued, "flowtel.ipfix.records.requeued", "{record}", "Flow records handed back to the sending queue for retry after a transport error.")
	counter(&t.resent, "flowtel.ipfix.records.resent", "{record}", "Flow records written again on a new connection because TCP had not acknowledged them when the previous one died (the collector may see some twice).")
	counter(&t.messages, "flowtel.ipfix.messages.sent", "{message}", "IPFIX messages (or JSON writes) sent, data and template.")
	counter(&t.templates, "flowtel.ipfix.templates.sent", "{template}", "Template records sent.")
	counter(&t.bytes, "flowtel.ipfix.bytes.sent", "By", "Bytes written to the collector.")
	counter(&t.connections, "flowtel.ipfix.connections", "{connection}", "Connection attempts to the collector, by result.")
	return t, err
}

var (
	resultOK     = metric.WithAttributes(attribute.String("result", "ok"))
	resultFailed = metric.WithAttributes(attribute.String("result", "failed"))
)

func withReason(r string) metric.AddOption {
	return metric.WithAttributes(attribute.String("reason", r))
}

func (t *telemetry) fail(ctx context.Context, reason string, n int64) {
	if n > 0 {
		t.failed.Add(ctx, n, withReason(reason))
	}
}
