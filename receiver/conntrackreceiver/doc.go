// Package conntrackreceiver implements the `conntrack` receiver: it polls the
// kernel's conntrack table (of its own or another network namespace) over
// netlink and emits one flow record (internal/flowrecord, as a plog
// LogRecord) per connection export, with Antrea Flow Exporter's semantics:
// active and idle timeouts, deltas since the previous export, end reasons,
// NAT details, and the antrea profile's zone-0 correlation.
package conntrackreceiver // import "github.com/flowtel/flowtel/receiver/conntrackreceiver"

//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml
