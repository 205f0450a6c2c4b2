//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml

// Package ipfixexporter exports flowtel flow records to an IPFIX collector with
// the templates and Information Elements of Antrea's Flow Aggregator (aggregate
// or proxy mode) or Antrea's agent, over TCP, UDP or TLS, or as newline-delimited
// JSON as Antrea's JSON record format does. Existing IPFIX collectors read the
// records exactly as they read Antrea's.
package ipfixexporter // import "github.com/flowtel/flowtel/exporter/ipfixexporter"
