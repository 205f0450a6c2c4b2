package filestorageextension

import (
	"context"
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/flowtel/flowtel/extension/filestorageextension/internal/metadata"
	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
)

// contrib is the file_storage extension this one wraps.
var contrib = filestorage.NewFactory()

// NewFactory returns the factory of the file_storage extension: contrib's
// configuration and defaults, contrib's extension, flowtel's diagnosis of a
// taken lock.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, contrib.CreateDefaultConfig, create, metadata.ExtensionStability)
}

func create(ctx context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	inner, err := contrib.Create(ctx, set, cfg)
	if err != nil {
		return nil, err
	}
	se, ok := inner.(storage.Extension)
	if !ok { // contrib's is one; this guards an upgrade that changes it
		return nil, fmt.Errorf("file_storage: contrib's extension is no storage extension (got %T); pin contrib's filestorage at a version that is", inner)
	}
	return newFileStorage(se, cfg.(*filestorage.Config), set.Logger), nil
}
