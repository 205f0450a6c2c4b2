//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml

// Package flowcorrelationprocessor implements the flow_correlation processor:
// the gateway side of flowtel. In aggregate mode it pairs the source-Node and
// destination-Node halves of each connection (by their correlation key, decision
// D3), keeps Antrea Flow Aggregator style per-Node statistics and throughputs,
// and re-exports every active timeout while new data arrives. Nothing it holds
// is lost (decision D4): a half without a peer is exported as unpaired after the
// pairing timeout, the memory cap exports early instead of dropping, and
// shutdown exports everything held. In proxy mode it keeps no state and only
// stamps each record with its flow direction.
package flowcorrelationprocessor // import "github.com/flowtel/flowtel/processor/flowcorrelationprocessor"
