package conntrackreceiver

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

// telemetry holds the receiver's own metrics. docs: README "Telemetry" maps
// each to Antrea's antrea_agent_conntrack_* metrics.
type telemetry struct {
	entries     metric.Int64Gauge // entries dumped by the last poll, all zones
	connections metric.Int64Gauge // connections held in the store
	tableMax    metric.Int64Gauge // nf_conntrack_max
	pollTime    metric.Float64Histogram
	emitted     metric.Int64Counter // records handed to the pipeline
	dropped     metric.Int64Counter // records lost, by reason
	shed        metric.Int64Counter // connections not tracked, by reason
	filtered    metric.Int64Counter // entries left out by the profile, by reason
	events      metric.Int64Counter // DESTROY events applied
	errs        metric.Int64Counter // netlink and storage errors, by reason
	flushed     metric.Int64Counter // records exported by the shutdown flush, by kind
	resumed     metric.Int64Counter // saved connections at a resume, by outcome
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	m := mp.Meter(metadata.ScopeName)
	t := &telemetry{}
	var err, e error
	t.entries, e = m.Int64Gauge("flowtel.conntrack.entries", metric.WithUnit("{entry}"),
		metric.WithDescription("Conntrack entries dumped by the last poll, all polled zones."))
	err = errors.Join(err, e)
	t.connections, e = m.Int64Gauge("flowtel.conntrack.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections held by the receiver's connection store."))
	err = errors.Join(err, e)
	t.tableMax, e = m.Int64Gauge("flowtel.conntrack.table.max", metric.WithUnit("{entry}"),
		metric.WithDescription("The conntrack table's size limit (nf_conntrack_max)."))
	err = errors.Join(err, e)
	t.pollTime, e = m.Float64Histogram("flowtel.conntrack.poll.duration", metric.WithUnit("s"),
		metric.WithDescription("Time to dump the conntrack table and update the connection store."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	err = errors.Join(err, e)
	t.emitted, e = m.Int64Counter("flowtel.conntrack.records.emitted", metric.WithUnit("{record}"),
		metric.WithDescription("Flow records handed to the next consumer."))
	err = errors.Join(err, e)
	t.dropped, e = m.Int64Counter("flowtel.conntrack.records.dropped", metric.WithUnit("{record}"),
		metric.WithDescription("Flow records lost, by reason (consumer_error, stale)."))
	err = errors.Join(err, e)
	t.shed, e = m.Int64Counter("flowtel.conntrack.connections.shed", metric.WithUnit("{connection}"),
		metric.WithDescription("New connections not tracked because the store was full (max_connections)."))
	err = errors.Join(err, e)
	t.filtered, e = m.Int64Counter("flowtel.conntrack.entries.filtered", metric.WithUnit("{entry}"),
		metric.WithDescription("Conntrack entries not reported, by reason (wrong_zone, protocol, ct_mark, uncorrelated)."))
	err = errors.Join(err, e)
	t.events, e = m.Int64Counter("flowtel.conntrack.events", metric.WithUnit("{event}"),
		metric.WithDescription("Conntrack DESTROY events received, by outcome (applied, ignored, shed, queue_full)."))
	err = errors.Join(err, e)
	t.errs, e = m.Int64Counter("flowtel.conntrack.netlink.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Netlink and storage errors, by reason (dump, enobufs, events, addresses, sysctl, storage); a failed dump is retried at the next poll."))
	err = errors.Join(err, e)
	t.flushed, e = m.Int64Counter("flowtel.conntrack.records.flushed", metric.WithUnit("{record}"),
		metric.WithDescription("Records exported at shutdown for what no record had reported yet, by reason (live: deltas of live connections, end_of_flow: connections already gone)."))
	err = errors.Join(err, e)
	t.resumed, e = m.Int64Counter("flowtel.conntrack.resume.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections the previous run saved to storage, by reason at restart (resumed: going on from the saved totals, ended: gone while no receiver ran; their last deltas are lost)."))
	err = errors.Join(err, e)
	return t, err
}

func reason(r string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("reason", r))
}
