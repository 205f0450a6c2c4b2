package k8sflowprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/flowtel/flowtel/internal/k8sindex"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// Reasons a record is dropped or an address stays unresolved: the values of
// the reason attributes, as metadata.yaml's enums list them.
const (
	reasonNoLocalEndpoint = "no_local_endpoint" // neither a local Pod nor this Node (decision D2)
	reasonNoNodeName      = "no_node_name"      // no node_name configured and none on the record
	reasonDecodeError     = "decode_error"      // not a valid flow record
	reasonNotSynced       = "cache_not_synced"  // Kubernetes caches not filled yet (wait_for_sync: false)
	reasonUnknownPod      = "unknown_pod"       // in a Node's podCIDR, no known Pod owns it
)

// Each reason's attribute set, built once.
var (
	dropNoLocal   = withAttr("reason", reasonNoLocalEndpoint)
	dropNoNode    = withAttr("reason", reasonNoNodeName)
	dropDecode    = withAttr("reason", reasonDecodeError)
	dropNotSynced = withAttr("reason", reasonNotSynced)
	unknownPod    = withAttr("reason", reasonUnknownPod)

	heldResolved = withAttr("outcome", "resolved") // its Pod became known while held
	heldExpired  = withAttr("outcome", "expired")  // hold_unresolved passed: exported unresolved
	heldShed     = withAttr("outcome", "shed")     // the hold was full: exported unresolved at once
	heldFlushed  = withAttr("outcome", "shutdown") // flushed at shutdown
)

func withAttr(k, v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
}

// newTelemetry builds the processor's metrics (generated from metadata.yaml)
// and observes the cache sizes of ix until TelemetryBuilder.Shutdown.
func newTelemetry(set component.TelemetrySettings, ix *k8sindex.Index) (*metadata.TelemetryBuilder, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	pods, podIPs, nodes, svcs, slices, owners := withAttr("resource", "pods"), withAttr("resource", "pod_ips"), withAttr("resource", "nodes"),
		withAttr("resource", "services"), withAttr("resource", "endpointslices"), withAttr("resource", "owners")
	return tb, tb.RegisterProcessorK8sFlowCacheObjectsCallback(func(_ context.Context, o metric.Int64Observer) error {
		s := ix.Sizes()
		o.Observe(int64(s.Pods), pods)
		o.Observe(int64(s.PodIPs), podIPs)
		o.Observe(int64(s.Nodes), nodes)
		o.Observe(int64(s.Services), svcs)
		o.Observe(int64(s.EndpointSlices), slices)
		o.Observe(int64(s.Owners), owners)
		return nil
	})
}
