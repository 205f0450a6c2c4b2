//go:build integration

package demodata

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// Write writes recs into database.flows of srv through the clickhouse_flows
// exporter (create_schema: true, as the demo's gateway runs it) and waits
// until the table holds them (and what it held before).
func Write(t testing.TB, srv *chserver.Server, database string, recs []*flowrecord.Record) {
	t.Helper()
	WriteWith(t, srv, database, recs, nil)
}

// WriteWith is Write with the exporter's configuration changed by configure
// (nil: none), such as a cluster to write through.
func WriteWith(t testing.TB, srv *chserver.Server, database string, recs []*flowrecord.Record, configure func(*clickhouseflowsexporter.Config)) {
	t.Helper()
	ctx := context.Background()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	count := func() (uint64, error) {
		var n uint64
		err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s.flows", database)).Scan(&n)
		return n, err
	}
	before, _ := count() // 0 when the table does not exist yet
	f := clickhouseflowsexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*clickhouseflowsexporter.Config)
	cfg.Endpoint = srv.Endpoint()
	cfg.Database = database
	if configure != nil {
		configure(cfg)
	}
	exp, err := f.CreateLogs(ctx, exportertest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(catalogue.ResourceClusterUID, "demo-cluster")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range recs {
		attrcodec.Encode(r, lrs.AppendEmpty())
	}
	if err := exp.ConsumeLogs(ctx, ld); err != nil {
		t.Fatal(err)
	}
	// Shutdown drains the sending queue.
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := before + uint64(len(recs))
	var n uint64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if n, err = count(); err == nil && n == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s.flows holds %d rows, want %d", database, n, want)
}
