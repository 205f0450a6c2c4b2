package servertlsextension

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/extension"

	"github.com/flowtel/flowtel/extension/servertlsextension/internal/metadata"
	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
)

// defaultLogInterval bounds the log to 8640 lines a day about refused
// handshakes, whatever a scanner does.
const defaultLogInterval = 10 * time.Second

// NewFactory returns the factory of the server_tls extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{TLS: configtls.NewDefaultServerConfig(), LogInterval: defaultLogInterval}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newServerTLS(set.TelemetrySettings, cfg.(*Config))
}
