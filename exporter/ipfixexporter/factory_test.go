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
	if !cfg.QueueConfig.HasValue() || !cfg.QueueConfig.Get().BlockOnOverflow {
		t.Fatal("the default sending queue must block when full")
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
	// A fan-out copies every batch for a consumer that mutates what it
	// consumes when another consumer reads the same batch (signal_to_metrics
	// beside the exporter, in the gateway): the default must not.
	if exp.Capabilities().MutatesData {
		t.Error("with its defaults the exporter declares that it mutates the logs it consumes (exporterhelper's batcher is on)")
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
