// Package flowstreamexporter serves the flow records it receives to gRPC
// clients, as a live stream scoped by Kubernetes RBAC with per-endpoint
// redaction (decision D11): the flow_stream exporter. Its wire protocol is
// Antrea's FlowStreamService (package flowstreampb). With history configured,
// a stream whose since is older than the ring is first served from the
// clickhouse_flows exporter's table, through the same authorization and
// redaction, then goes on live without a gap or a duplicate at the seam
// (history.go, seam.go).
package flowstreamexporter // import "github.com/flowtel/flowtel/exporter/flowstreamexporter"

//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml
