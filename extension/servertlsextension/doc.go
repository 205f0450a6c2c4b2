//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml

// Package servertlsextension is a gRPC server middleware that owns a server's
// TLS handshake: it serves the TLS settings it is given (certificate, client
// CA, reloading) in place of the server's own and counts every handshake,
// accepted or refused with a reason, so a client without a certificate, with
// one from another CA or with an expired one is refused and counted.
package servertlsextension // import "github.com/flowtel/flowtel/extension/servertlsextension"
