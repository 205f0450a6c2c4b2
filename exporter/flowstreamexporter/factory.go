package flowstreamexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
	"github.com/flowtel/flowtel/internal/k8sclient"
)

// Defaults (Antrea's where it has one).
const (
	defaultEndpoint            = ":14740"
	defaultBufferSize          = 8192
	defaultDecisionTTL         = 10 * time.Minute
	defaultRecheckInterval     = time.Minute
	defaultMaxTokenReviews     = 8
	defaultMaxStreams          = 256
	defaultMaxStreamsPerClient = 64
	defaultHistoryMaxRows      = 100000
	defaultHistoryQueryTimeout = time.Minute
	defaultHistoryDialTimeout  = 10 * time.Second
)

// NewFactory returns the factory of the flow_stream exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	srv := configgrpc.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = defaultEndpoint
	srv.TLS = configoptional.Default(configtls.NewDefaultServerConfig())
	return &Config{
		ServerConfig: srv,
		BufferSize:   defaultBufferSize,
		Kubernetes: AuthConfig{
			Auth:                      k8sclient.Auth{AuthType: k8sclient.AuthServiceAccount},
			APIGroup:                  DefaultAPIGroup,
			DecisionTTL:               defaultDecisionTTL,
			RecheckInterval:           defaultRecheckInterval,
			MaxConcurrentTokenReviews: defaultMaxTokenReviews,
		},
		Limits: LimitsConfig{MaxStreams: defaultMaxStreams, MaxStreamsPerClient: defaultMaxStreamsPerClient},
		History: HistoryConfig{Database: "default", Table: "flows", MaxRows: defaultHistoryMaxRows,
			QueryTimeout: defaultHistoryQueryTimeout, DialTimeout: defaultHistoryDialTimeout},
	}
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	e, err := newExporter(cfg.(*Config), set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewLogs(ctx, set, cfg, e.pushLogs,
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown))
}
