//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/metadata"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// testConfig is the default config pointed at srv, with fast retries so
// tests that stop the server do not wait for the production back-off.
func testConfig(srv *chserver.Server, database string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = srv.Endpoint()
	cfg.Database = database
	cfg.RetryConfig = configretry.NewDefaultBackOffConfig()
	cfg.RetryConfig.InitialInterval = 100 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 500 * time.Millisecond
	cfg.RetryConfig.MaxElapsedTime = time.Minute
	return cfg
}

// newExporter creates the exporter through the factory, with in-memory telemetry.
func newExporter(t testing.TB, cfg *Config, opts ...componenttest.TelemetryOption) (exporter.Logs, *componenttest.Telemetry) {
	t.Helper()
	tt := componenttest.NewTelemetry(opts...)
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	exp, err := NewFactory().CreateLogs(context.Background(), set, cfg)
	if err != nil {
		t.Fatalf("CreateLogs: %v", err)
	}
	return exp, tt
}

// startExporter creates and starts the exporter and shuts it down at cleanup.
func startExporter(t testing.TB, cfg *Config, opts ...componenttest.TelemetryOption) (exporter.Logs, *componenttest.Telemetry) {
	t.Helper()
	exp, tt := newExporter(t, cfg, opts...)
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := exp.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return exp, tt
}

// client opens a separate connection for the test's own queries.
func client(t testing.TB, srv *chserver.Server) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func exec(t testing.TB, conn driver.Conn, q string) {
	t.Helper()
	if err := conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func count(t testing.TB, conn driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// logsOf encodes records as one ResourceLogs carrying clusterUID as k8s.cluster.uid.
func logsOf(clusterUID string, recs ...*flowrecord.Record) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	if clusterUID != "" {
		rl.Resource().Attributes().PutStr(catalogue.ResourceClusterUID, clusterUID)
	}
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	lrs.EnsureCapacity(len(recs))
	for _, r := range recs {
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	return ld
}

// metricSum is the sum of a counter's data points whose attributes include
// the given reason ("" for all points); 0 when the metric was never recorded.
// writtenAfter returns rows_written once it reaches want or 10 s passed: the
// server holds a batch's rows once its INSERT commits, a moment before the
// driver's Send returns and the exporter counts them (Theia's views,
// written with the table, widen that moment).
func writtenAfter(t testing.TB, tt *componenttest.Telemetry, want int64) int64 {
	t.Helper()
	var n int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n = metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_written", ""); n >= want {
			break
		}
	}
	return n
}

func metricSum(t testing.TB, tt *componenttest.Telemetry, name, reason string) int64 {
	t.Helper()
	m, err := tt.GetMetric(name)
	if err != nil {
		return 0
	}
	return sumPoints(m, reason)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
