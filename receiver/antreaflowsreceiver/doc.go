// Package antreaflowsreceiver implements the `antrea_flows` receiver: the
// gateway's drop-in for Antrea's Flow Aggregator. Unmodified Antrea agents
// export to it, over IPFIX (TCP, TLS, UDP, with the agents' templates) or
// gRPC (Antrea's FlowExportService), and each record they send becomes a
// flowtel record half (internal/flowrecord) of the Node that sent it, in the
// same form flowtel's node collectors send, so that flow_correlation pairs
// agent halves with each other and with flowtel's own.
package antreaflowsreceiver // import "github.com/flowtel/flowtel/receiver/antreaflowsreceiver"

//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml
