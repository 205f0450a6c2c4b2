package nodeidentityprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"k8s.io/client-go/kubernetes"

	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
	"github.com/flowtel/flowtel/processor/nodeidentityprocessor/internal/metadata"
)

// clientFunc makes the Kubernetes client; tests substitute their own.
type clientFunc func(*Config) (kubernetes.Interface, error)

func newClient(cfg *Config) (kubernetes.Interface, error) {
	return cfg.Client("flowtel-node_identity")
}

// NewFactory returns the node_identity processor factory.
func NewFactory() processor.Factory { return newFactory(newClient) }

func newFactory(client clientFunc) processor.Factory {
	return processor.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() },
		processor.WithLogs(func(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
			p, err := newProcessor(set, cfg.(*Config), client)
			if err != nil {
				return nil, err
			}
			return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
				processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
				processorhelper.WithStart(p.start),
				processorhelper.WithShutdown(p.shutdown))
		}, metadata.LogsStability))
}
