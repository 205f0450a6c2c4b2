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

// A server that stalls (SIGSTOP) with an insert under way, longer than the
// insert's timeout, and then goes on: every record arrives exactly once.
func TestStalledServerTakesEachRowOnce(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	t.Cleanup(srv.Resume)
	cfg := testConfig(srv, "stall")
	cfg.TimeoutConfig.Timeout = time.Second
	exp, tt := startExporter(t, cfg)
	ctx := context.Background()
	conn := client(t, srv)

	const batch = 500
	if err := exp.ConsumeLogs(ctx, logsOf("c", streamBatch(0, batch)...)); err != nil {
		t.Fatalf("ConsumeLogs: %v", err)
	}
	waitFor(t, 30*time.Second, "the first batch", func() bool { return count(t, conn, "SELECT count() FROM stall.flows") == batch })

	srv.Pause()
	if err := exp.ConsumeLogs(ctx, logsOf("c", streamBatch(batch, batch)...)); err != nil {
		t.Fatalf("ConsumeLogs: %v", err)
	}
	// The insert is sent, the server does not answer, the insert times out
	// (1 s) and is tried again, more than once.
	waitFor(t, 30*time.Second, "a timed-out insert", func() bool {
		return metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_insert_failed", reasonTimeout) > 0
	})
	time.Sleep(2 * time.Second)
	srv.Resume()

	const sent = 2 * batch
	waitFor(t, 60*time.Second, fmt.Sprintf("%d rows", sent), func() bool {
		return count(t, conn, "SELECT count() FROM stall.flows") >= sent
	})
	time.Sleep(3 * time.Second) // an insert the server took late lands by now
	if n := count(t, conn, "SELECT count() FROM stall.flows"); n != sent {
		t.Errorf("%d rows, want %d (an insert whose answer was lost, inserted again)", n, sent)
	}
	if n := count(t, conn, "SELECT uniqExact(sourcePodName) FROM stall.flows"); n != sent {
		t.Errorf("%d distinct records, want %d", n, sent)
	}
	t.Logf("rows in timed-out attempts: %d", metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_insert_failed", reasonTimeout))
}
