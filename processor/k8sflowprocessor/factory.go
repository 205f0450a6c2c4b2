package k8sflowprocessor

import (
	"context"
	"os"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"k8s.io/client-go/kubernetes"

	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
	"github.com/flowtel/flowtel/internal/k8sindex"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

// clientFunc makes the Kubernetes client; tests substitute a fake clientset.
type clientFunc func(*Config) (kubernetes.Interface, error)

func newClient(cfg *Config) (kubernetes.Interface, error) {
	return cfg.Client("flowtel-k8s_flow")
}

// NewFactory returns the k8s_flow processor factory.
func NewFactory() processor.Factory { return newFactory(newClient, time.Now) }

// newFactory lets tests substitute the Kubernetes client and the clock.
func newFactory(client clientFunc, now func() time.Time) processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithLogs(func(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
			return createLogs(ctx, set, cfg.(*Config), next, client, now)
		}, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		NodeName:        os.Getenv(NodeNameEnv),
		Pods:            PodsLocal,
		Settings:        k8sindex.DefaultSettings(),
		HoldUnresolved:  DefaultHoldUnresolved,
		HoldMaxRecords:  DefaultHoldMaxRecords,
		NetworkPolicies: true,
		Encoding:        EncodingAttributes,
	}
}

func createLogs(ctx context.Context, set processor.Settings, cfg *Config, next consumer.Logs, client clientFunc, now func() time.Time) (processor.Logs, error) {
	p, err := newProcessor(set, cfg, client, now)
	if err != nil {
		return nil, err
	}
	p.next = next
	return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown))
}
