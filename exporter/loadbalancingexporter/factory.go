package loadbalancingexporter

import (
	"context"
	"fmt"
	"strings"

	lb "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/xexporter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/flowtel/flowtel/exporter/loadbalancingexporter/internal/metadata"
	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
)

// contrib is the load_balancing exporter this one wraps.
var contrib = lb.NewFactory()

// NewFactory returns the factory of the load_balancing exporter: contrib's
// configuration, defaults and exporter, given a logger that holds back the
// retries of batches no backend could be found for (waitingCore).
func NewFactory() exporter.Factory {
	return xexporter.NewFactory(metadata.Type, contrib.CreateDefaultConfig,
		xexporter.WithTraces(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
			return contrib.CreateTraces(ctx, quiet(set, cfg), cfg)
		}, metadata.TracesStability),
		xexporter.WithMetrics(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
			return contrib.CreateMetrics(ctx, quiet(set, cfg), cfg)
		}, metadata.MetricsStability),
		xexporter.WithLogs(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
			return contrib.CreateLogs(ctx, quiet(set, cfg), cfg)
		}, metadata.LogsStability),
		xexporter.WithDeprecatedTypeAlias(metadata.DeprecatedType),
	)
}

// quiet gives the exporter (and the exporterhelper around it, which logs the
// retries) a logger whose core is a waitingCore.
func quiet(set exporter.Settings, cfg component.Config) exporter.Settings {
	c := cfg.(*lb.Config)
	w := newWaitState(resolverOf(c), c.BackOffConfig.MaxInterval)
	set.Logger = set.Logger.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return &waitingCore{Core: core, state: w}
	}))
	return set
}

// resolverOf names the configured resolver and what it resolves, for the
// log line that says it has returned nothing.
func resolverOf(c *lb.Config) string {
	r := c.Resolver
	switch {
	case r.K8sSvc.HasValue():
		return "k8s service " + r.K8sSvc.Get().Service
	case r.DNS.HasValue():
		return "dns " + r.DNS.Get().Hostname
	case r.Static.HasValue():
		return "static " + strings.Join(r.Static.Get().Hostnames, ",")
	case r.AWSCloudMap.HasValue():
		return fmt.Sprintf("aws_cloud_map %s/%s", r.AWSCloudMap.Get().NamespaceName, r.AWSCloudMap.Get().ServiceName)
	}
	return "none"
}
