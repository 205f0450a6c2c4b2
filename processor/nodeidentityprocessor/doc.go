// Package nodeidentityprocessor implements the node_identity processor: in
// the gateway, it learns which Node sent a request from the node collector's
// projected ServiceAccount token (a TokenReview names the Node of the Pod the
// token is bound to) and refuses, counted, every flow record that names
// another Node, so a node collector may only report its own Node's
// connections.
package nodeidentityprocessor // import "github.com/flowtel/flowtel/processor/nodeidentityprocessor"

//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml
