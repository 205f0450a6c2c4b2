package clickhouseflowsexporter

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.Type() != metadata.Type || f.Type().String() != "clickhouse_flows" {
		t.Fatalf("type %q", f.Type())
	}
	if f.LogsStability() != metadata.LogsStability {
		t.Errorf("stability %v", f.LogsStability())
	}
	cfg := f.CreateDefaultConfig().(*Config)
	q := cfg.QueueConfig.Get()
	if q == nil || q.Batch.Get() == nil {
		t.Fatal("the default config must queue and batch")
	}
	if b := q.Batch.Get(); b.MinSize != defaultMinRows || b.FlushTimeout != time.Second || b.Sizer.String() != "items" {
		t.Errorf("default batch %+v", b)
	}
	if cfg.Database != "default" || cfg.Table != "flows" || !cfg.CreateSchema || cfg.Compression != "lz4" || cfg.TTL != 0 {
		t.Errorf("defaults: %+v", cfg)
	}
	if err := cfg.Validate(); err == nil {
		t.Error("default config without endpoint validated")
	}
	cfg.Endpoint = "tcp://127.0.0.1:1" // nothing listens: Start must not fail
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("Start with an unreachable server: %v", err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestFactoryRejectsBadEndpoint(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = "http://clickhouse:8123"
	if _, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg); err == nil {
		t.Fatal("CreateLogs accepted an http endpoint")
	}
}
