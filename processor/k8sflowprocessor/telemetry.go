package k8sflowprocessor

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/internal/k8sindex"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// Reasons a record is dropped or an address stays unresolved.
const (
	reasonNoLocalEndpoint = "no_local_endpoint" // neither a local Pod nor this Node (decision D2)
	reasonNoNodeName      = "no_node_name"      // no node_name configured and none on the record
	reasonDecodeError     = "decode_error"      // not a valid flow record
	reasonNotSynced       = "cache_not_synced"  // Kubernetes caches not filled yet (wait_for_sync: false)
	reasonUnknownPod      = "unknown_pod"       // in a Node's podCIDR, no known Pod owns it
)

type telemetry struct {
	received, enriched, dropped, unresolved metric.Int64Counter
	cacheReg                                metric.Registration

	dropNoLocal, dropNoNode, dropDecode, dropNotSynced, unknownPod metric.MeasurementOption
}

func newTelemetry(mp metric.MeterProvider, ix *k8sindex.Index) (*telemetry, error) {
	m := mp.Meter(metadata.ScopeName)
	t := &telemetry{
		dropNoLocal:   reasonOpt(reasonNoLocalEndpoint),
		dropNoNode:    reasonOpt(reasonNoNodeName),
		dropDecode:    reasonOpt(reasonDecodeError),
		dropNotSynced: reasonOpt(reasonNotSynced),
		unknownPod:    reasonOpt(reasonUnknownPod),
	}
	var errs [6]error
	t.received, errs[0] = m.Int64Counter("flowtel.k8s_flow.records.received",
		metric.WithUnit("{record}"), metric.WithDescription("Flow records received by the k8s_flow processor."))
	t.enriched, errs[1] = m.Int64Counter("flowtel.k8s_flow.records.enriched",
		metric.WithUnit("{record}"), metric.WithDescription("Flow records enriched and passed on."))
	t.dropped, errs[2] = m.Int64Counter("flowtel.k8s_flow.records.dropped",
		metric.WithUnit("{record}"), metric.WithDescription("Flow records dropped, by reason (no_local_endpoint: another Node reports it; no_node_name; decode_error; cache_not_synced)."))
	t.unresolved, errs[3] = m.Int64Counter("flowtel.k8s_flow.addresses.unresolved",
		metric.WithUnit("{address}"), metric.WithDescription("Endpoint addresses inside a Node's podCIDR that no known Pod owned at the connection's start."))
	cache, err := m.Int64ObservableGauge("flowtel.k8s_flow.cache.objects",
		metric.WithUnit("{object}"), metric.WithDescription("Objects in the Kubernetes cache, by resource."))
	errs[4] = err
	if err == nil {
		attrs := func(r string) metric.ObserveOption { return metric.WithAttributes(attribute.String("resource", r)) }
		pods, podIPs, nodes, svcs, slices, owners := attrs("pods"), attrs("pod_ips"), attrs("nodes"), attrs("services"), attrs("endpointslices"), attrs("owners")
		t.cacheReg, errs[5] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			s := ix.Sizes()
			o.ObserveInt64(cache, int64(s.Pods), pods)
			o.ObserveInt64(cache, int64(s.PodIPs), podIPs)
			o.ObserveInt64(cache, int64(s.Nodes), nodes)
			o.ObserveInt64(cache, int64(s.Services), svcs)
			o.ObserveInt64(cache, int64(s.EndpointSlices), slices)
			o.ObserveInt64(cache, int64(s.Owners), owners)
			return nil
		}, cache)
	}
	return t, errors.Join(errs[:]...)
}

func reasonOpt(r string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

func (t *telemetry) shutdown() {
	if t.cacheReg != nil {
		_ = t.cacheReg.Unregister()
	}
}
