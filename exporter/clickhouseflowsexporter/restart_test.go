//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// streamBatch returns n records numbered from first, each with a unique
// source Pod name "r-<i>".
func streamBatch(first, n int) []*flowrecord.Record {
	out := make([]*flowrecord.Record, n)
	for i := range out {
		r := interNodePairedRecord()
		r.Source.PodName = fmt.Sprintf("r-%d", first+i)
		r.Source.Port = uint16(1024 + (first+i)%60000)
		out[i] = r
	}
	return out
}

// The server is stopped and restarted while records keep coming: every
// record arrives exactly once, and the failed attempts are counted.
func TestServerRestartMidStream(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	exp, tt := startExporter(t, testConfig(srv, "restart"))
	ctx := context.Background()

	const batch = 500
	sent := 0
	send := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			if err := exp.ConsumeLogs(ctx, logsOf("c", streamBatch(sent, batch)...)); err != nil {
				t.Fatalf("ConsumeLogs: %v", err)
			}
			sent += batch
			time.Sleep(20 * time.Millisecond)
		}
	}
	send(1500 * time.Millisecond) // written normally
	srv.Stop()
	send(2500 * time.Millisecond) // queued and retried while the server is down
	srv.Restart()
	send(1500 * time.Millisecond) // after the restart

	conn := client(t, srv)
	waitFor(t, 60*time.Second, fmt.Sprintf("%d rows", sent), func() bool {
		return count(t, conn, "SELECT count() FROM restart.flows") >= uint64(sent)
	})
	if n := count(t, conn, "SELECT count() FROM restart.flows"); n != uint64(sent) {
		t.Errorf("%d rows, want %d (duplicates)", n, sent)
	}
	if n := count(t, conn, "SELECT uniqExact(sourcePodName) FROM restart.flows"); n != uint64(sent) {
		t.Errorf("%d distinct records, want %d", n, sent)
	}
	if n := writtenAfter(t, tt, int64(sent)); n != int64(sent) {
		t.Errorf("rows.written = %d, want %d", n, sent)
	}
	if n := metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_insert_failed", reasonConnection); n == 0 {
		t.Error("rows.insert_failed{reason=connection} = 0: no insert was attempted while the server was down")
	}
	t.Logf("%d records, %d rows in failed attempts (retried)", sent,
		metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_insert_failed", ""))
}

// A server that is down when the collector starts does not fail Start; the
// schema is created and the records written once it is up.
func TestServerDownAtStart(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	srv.Stop()
	exp, _ := startExporter(t, testConfig(srv, "latecomer"))
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", streamBatch(0, 10)...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // at least one attempt fails
	srv.Restart()
	conn := client(t, srv)
	waitFor(t, 30*time.Second, "10 rows", func() bool {
		var n uint64
		// The table does not exist until the exporter has created it.
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM latecomer.flows").Scan(&n); err != nil {
			return false
		}
		return n == 10
	})
}
