//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml

// Package k8scertificatesextension keeps the certificates of flowtel's two
// TLS hops in Kubernetes Secrets: it creates a gateway CA and a node CA once,
// and issues (and reissues before expiry) the gateway's, the node collectors'
// and the flow stream fan-in's certificates, in the Secrets the Pods mount.
package k8scertificatesextension
