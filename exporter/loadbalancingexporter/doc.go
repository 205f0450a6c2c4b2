//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml

// Package loadbalancingexporter is contrib's load_balancing exporter, quiet
// while its resolver has no endpoint: same type, same configuration, same
// routing, queue and retries; while the resolver has returned no backend
// (the gateways are starting, or all gone), the queue's retry of each batch is
// not logged one line per batch and retry with the error "couldn't find the
// exporter for the endpoint", but said in one line, and again every few
// minutes while it lasts.
package loadbalancingexporter // import "github.com/flowtel/flowtel/exporter/loadbalancingexporter"
