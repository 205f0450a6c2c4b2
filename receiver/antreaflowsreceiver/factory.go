package antreaflowsreceiver

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14), should an agent compress
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadata"
)

// NewFactory returns the factory of the antrea_flows receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() },
		receiver.WithLogs(createLogs, metadata.LogsStability))
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	if next == nil {
		return nil, errNilConsumer
	}
	return newReceiver(set, cfg.(*Config), next)
}
