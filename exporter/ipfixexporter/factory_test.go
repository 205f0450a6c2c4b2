package ipfixexporter

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.Type() != metadata.Type {
		t.Fatalf("type %s", f.Type())
	}
	cfg := f.CreateDefaultConfig().(*Config)
	if err := componenttest.CheckConfigStruct(cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.QueueConfig.HasValue() || cfg.QueueConfig.Get().Batch.Get() == nil {
		t.Fatal("the default sending queue must batch records")
	}
	if cfg.Transport != TransportTCP || cfg.RecordLayout != "aggregate" || !cfg.IncludeK8sNames || cfg.IncludeK8sUIDs ||
		cfg.Format != FormatIPFIX || cfg.messageSize() != 65535 || cfg.ObservationDomainID != nil {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg.Endpoint = "127.0.0.1:1" // nothing listens: start must not need the collector
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
