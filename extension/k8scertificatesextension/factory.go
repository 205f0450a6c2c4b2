package k8scertificatesextension

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/flowtel/flowtel/extension/k8scertificatesextension/internal/metadata"
	_ "github.com/flowtel/flowtel/internal/grpcgzip" // every flowtel component links it (D14)
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// NewFactory returns the factory of the k8s_certificates extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

// The defaults are the kustomize names and cert-manager component's schedule:
// 90-day certificates renewed 30 days before expiry, 10-year CAs whose
// successor is published 180 days before expiry and signs from 90 days before.
func createDefaultConfig() component.Config {
	return &Config{
		Auth:           k8sclient.Auth{AuthType: k8sclient.AuthServiceAccount},
		GatewayName:    "flowtel-gateway",
		NodeName:       "flowtel-node",
		FlowStreamName: "flowtel-flowstream",
		CAValidity:     10 * 365 * 24 * time.Hour,
		CARenewBefore:  180 * 24 * time.Hour,
		Validity:       90 * 24 * time.Hour,
		RenewBefore:    30 * 24 * time.Hour,
		CheckInterval:  time.Hour,
		WaitTimeout:    90 * time.Second,
	}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &certificates{cfg: *cfg.(*Config), logger: set.Logger, tel: tel}, nil
}
