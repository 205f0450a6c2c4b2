package clickhouseflowsexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/metadata"
	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
	"github.com/flowtel/flowtel/internal/recordexport"
)

// Defaults sized for ClickHouse, which wants few, large inserts: a batch is
// sent when it holds defaultMinRows rows or is defaultFlushTimeout old, so at
// Theia-like rates (a few thousand flows/s) that is about one insert per
// second with thousands of rows, and under load a few inserts per second of
// tens of thousands of rows each.
const (
	defaultFlushTimeout = time.Second
	defaultMinRows      = 20_000
	defaultMaxRows      = 100_000
	defaultQueueRows    = 500_000
	defaultConsumers    = 4
	defaultTimeout      = 30 * time.Second
)

// NewFactory returns the clickhouse_flows exporter factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability))
}

// defaultQueueConfig blocks when full rather than refusing, as
// recordexport.BlockingQueue says why.
func defaultQueueConfig() exporterhelper.QueueBatchConfig {
	return recordexport.BlockingQueue(defaultQueueRows, defaultConsumers, defaultFlushTimeout, defaultMinRows, defaultMaxRows)
}

func createDefaultConfig() component.Config {
	return &Config{
		Sending: recordexport.Sending{
			TimeoutConfig: exporterhelper.TimeoutConfig{Timeout: defaultTimeout},
			QueueConfig:   configoptional.Some(defaultQueueConfig()),
			RetryConfig:   configretry.NewDefaultBackOffConfig(),
		},
		Database:     "default",
		Table:        "flows",
		CreateSchema: true,
		TheiaViews:   true,
		Compression:  "lz4",
		DialTimeout:  10 * time.Second,
		TLS:          configtls.NewDefaultClientConfig(),
	}
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	e, err := newFlowsExporter(c, set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return recordexport.NewLogs(ctx, set, cfg, &c.Sending, e.pushLogs, e.start, e.shutdown)
}
