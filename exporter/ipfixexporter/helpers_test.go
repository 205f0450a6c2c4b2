package ipfixexporter

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// testExporter builds and starts the exporter's core (no sending queue, so
// pushLogs results are seen directly), dialing with dial.
func testExporter(t testing.TB, cfg *Config, dial dialFunc) (*ipfixExporter, *componenttest.Telemetry) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	if dial != nil {
		e.dial = dial
	}
	if err := e.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.Background()) })
	return e, tt
}

func testConfig(endpoint, transport string, kind layout.Kind) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = endpoint
	cfg.Transport = transport
	cfg.RecordLayout = string(kind)
	return cfg
}

func recordsWithPorts(from, n int) []*flowrecord.Record {
	out := make([]*flowrecord.Record, n)
	for i := range out {
		r := fullRecord(false)
		r.Source.Port = uint16(from + i)
		out[i] = r
	}
	return out
}
