package conntrackreceiver

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The receiver's own metrics are generated from metadata.yaml
// (metadata.TelemetryBuilder, documented in documentation.md; the README's
// "Telemetry" maps them to Antrea's antrea_agent_conntrack_* metrics). These
// are the values of their reason attributes, as the enums there list them,
// each an attribute set built once.
var (
	droppedConsumerError = reason("consumer_error")
	droppedStale         = reason("stale")

	shedMaxConnections = reason("max_connections")

	filteredWrongZone    = reason("wrong_zone")
	filteredProtocol     = reason("protocol")
	filteredCTMark       = reason("ct_mark")
	filteredUncorrelated = reason("uncorrelated")

	eventApplied      = reason("applied")
	eventIgnored      = reason("ignored")
	eventAlreadyEnded = reason("already_ended")
	eventShed         = reason("shed")
	eventQueueFull    = reason("queue_full")

	failedDump      = reason("dump")
	failedENOBUFS   = reason("enobufs")
	failedEvents    = reason("events")
	failedAddresses = reason("addresses")
	failedSysctl    = reason("sysctl")
	failedStorage   = reason("storage")
	failedNFLOG     = reason("nflog")

	flushedLive      = reason("live")
	flushedEndOfFlow = reason("end_of_flow")

	incompleteNoCounters   = reason("no_counters")
	incompleteNoTimestamps = reason("no_timestamps")

	resumeResumed = reason("resumed")
	resumeEnded   = reason("ended")
	resumeClosed  = reason("closed")
)

func reason(v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", v)))
}
