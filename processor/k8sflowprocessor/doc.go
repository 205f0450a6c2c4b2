// Package k8sflowprocessor implements the k8s_flow processor: it turns the
// conntrack receiver's raw connections into flow records a person can read.
// For each record it names both endpoints (Pod, Node or external, decision D1)
// from Kubernetes state kept by client-go informers, resolves the Service from
// the pre-DNAT destination, sets the flow type, decides which half of the
// connection this Node reports (decision D2) and drops, counted, connections
// with no local endpoint, and sets the correlation key and TraceID (decision D3).
package k8sflowprocessor // import "github.com/flowtel/flowtel/processor/k8sflowprocessor"

//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml
