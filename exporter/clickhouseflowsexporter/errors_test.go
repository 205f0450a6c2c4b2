//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// startErr starts an exporter that must fail to start, and returns the error.
func startErr(t *testing.T, cfg *Config) error {
	t.Helper()
	exp, _ := newExporter(t, cfg)
	err := exp.Start(context.Background(), componenttest.NewNopHost())
	if shutdownErr := exp.Shutdown(context.Background()); shutdownErr != nil {
		t.Errorf("Shutdown: %v", shutdownErr)
	}
	if err == nil {
		t.Fatal("Start succeeded, want an error")
	}
	t.Logf("Start error: %v", err)
	return err
}

func wantAll(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestStartErrors(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	conn := client(t, srv)

	t.Run("wrong password", func(t *testing.T) {
		cfg := testConfig(srv, "default")
		cfg.Username, cfg.Password = chserver.User, "not-the-password"
		err := startErr(t, cfg)
		wantAll(t, err, "username: authentication", `user "flowtel"`, srv.Endpoint(), "check username and password")
	})

	t.Run("unknown database", func(t *testing.T) {
		cfg := testConfig(srv, "no_such_db")
		cfg.CreateSchema = false
		err := startErr(t, cfg)
		wantAll(t, err, "database: does not exist on "+srv.Endpoint()+" (got `no_such_db`)", "create_schema: true")
	})

	t.Run("missing table", func(t *testing.T) {
		cfg := testConfig(srv, "default")
		cfg.Table = "no_such_table"
		cfg.CreateSchema = false
		err := startErr(t, cfg)
		wantAll(t, err, "table: does not exist on "+srv.Endpoint()+" (got `default`.`no_such_table`)")
	})

	t.Run("table missing a column", func(t *testing.T) {
		// An Antrea/Theia table as it exists today: no flowtel columns.
		exec(t, conn, "CREATE DATABASE IF NOT EXISTS theia")
		exec(t, conn, flowtable.CreateTable("theia", "flows", 0))
		exec(t, conn, "ALTER TABLE theia.flows DROP COLUMN correlationState")
		cfg := testConfig(srv, "theia")
		cfg.CreateSchema = true // an existing table is left as it is, and checked
		err := startErr(t, cfg)
		wantAll(t, err, "table: `theia`.`flows` lacks column(s) correlationState String",
			"ALTER TABLE `theia`.`flows` ADD COLUMN correlationState String")
		// The suggested statement fixes it.
		exec(t, conn, "ALTER TABLE `theia`.`flows` ADD COLUMN correlationState String")
		exp, _ := startExporter(t, cfg)
		if err := exp.ConsumeLogs(context.Background(), logsOf("c", intraNodeRecord())); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the row", func() bool { return count(t, conn, "SELECT count() FROM theia.flows") == 1 })
	})

	t.Run("right password", func(t *testing.T) {
		cfg := testConfig(srv, "withpassword")
		t.Setenv(envUsername, chserver.User)
		t.Setenv(envPassword, chserver.Password)
		exp, _ := startExporter(t, cfg)
		if err := exp.ConsumeLogs(context.Background(), logsOf("c", intraNodeRecord())); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the row", func() bool { return count(t, conn, "SELECT count() FROM withpassword.flows") == 1 })
	})
}

// A record that is not a flow record is skipped, counted and reported; the
// others in the same batch are written.
func TestBadRecordIsCountedOthersWritten(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	conn := client(t, srv)
	exp, tt := startExporter(t, testConfig(srv, "badinput"))

	ld := logsOf("c", intraNodeRecord(), toExternalRecord())
	bad := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	bad.Attributes().PutStr("source.address", "not-an-ip")
	if err := exp.ConsumeLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "2 rows", func() bool { return count(t, conn, "SELECT count() FROM badinput.flows") == 2 })
	if n := metricSum(t, tt, "otelcol_exporter_clickhouse_flows_records_failed", reasonDecode); n != 1 {
		t.Errorf("records.failed{reason=decode} = %d, want 1", n)
	}
}

// ttl is applied only where the server supports it: 18.16 does not, so the
// exporter creates the table without it (18.16 would reject the clause).
func TestTTLIgnoredOnOldServer(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	cfg := testConfig(srv, "withttl")
	cfg.TTL = time.Hour
	startExporter(t, cfg)
	conn := client(t, srv)
	var ddl string
	if err := conn.QueryRow(context.Background(), "SHOW CREATE TABLE withttl.flows").Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ddl, "TTL") {
		t.Errorf("table on 18.16 has a TTL: %s", ddl)
	}
}
