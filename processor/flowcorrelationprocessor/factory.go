package flowcorrelationprocessor

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

// Defaults, as Antrea's Flow Aggregator (activeFlowRecordTimeout,
// inactiveFlowRecordTimeout).
const (
	defaultActiveTimeout   = 60 * time.Second
	defaultInactiveTimeout = 90 * time.Second
	// defaultMaxRecords bounds memory to roughly 1.7 GiB of held connections
	// (about 1.8 KB each, see BenchmarkMemoryPer100kPending).
	defaultMaxRecords = 1_000_000
)

// NewFactory returns the flow_correlation processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		Mode:            ModeAggregate,
		ActiveTimeout:   defaultActiveTimeout,
		InactiveTimeout: defaultInactiveTimeout,
		MaxRecords:      defaultMaxRecords,
		Kubernetes:      configoptional.Default(defaultKubernetesConfig()),
	}
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	return newProcessor(set, cfg.(*Config), next, realClock{})
}
