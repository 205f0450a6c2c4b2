//go:generate go tool -modfile=../../internal/tools/go.mod go.opentelemetry.io/collector/cmd/mdatagen metadata.yaml

// Package filestorageextension is contrib's file_storage extension with a
// diagnosis when its file lock is taken: same type, same configuration, same
// files, and where contrib's returns bbolt's bare "timeout" because another
// process holds the lock on a storage file, an error that names the file, the
// process holding it as far as this container can see it, and what to do.
package filestorageextension // import "github.com/flowtel/flowtel/extension/filestorageextension"
