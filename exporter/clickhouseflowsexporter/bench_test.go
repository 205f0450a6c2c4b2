//go:build integration

package clickhouseflowsexporter

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// benchLogs returns batches of 1000 records, a mix of the five record kinds,
// as a gateway's OTLP receiver would hand them on.
func benchLogs(batches int) []plog.Logs {
	kinds := []func() *flowrecord.Record{intraNodeRecord, interNodePairedRecord, interNodeUnpairedRecord, toExternalRecord, fromExternalRecord}
	out := make([]plog.Logs, batches)
	for b := range out {
		recs := make([]*flowrecord.Record, 1000)
		for i := range recs {
			r := kinds[i%len(kinds)]()
			r.Source.Port = uint16(1024 + i)
			recs[i] = r
		}
		out[b] = logsOf("cluster-uid-bench", recs...)
	}
	return out
}

// detailedOnly are the exporterhelper metrics a collector records only at
// telemetry level detailed (not at the default, normal). Both size every
// request by marshalling it, a cost of its own per row, so BenchmarkInsert
// drops them as a collector at the default level does.
var detailedOnly = []string{"otelcol_exporter_enqueue_size_bytes", "otelcol_exporter_queue_batch_send_size_bytes"}

// BenchmarkInsert measures rows/s into the local server through the whole
// exporter (queue, default batching, decode, insert). block_on_overflow is
// set so the producer waits instead of getting queue-full errors.
func BenchmarkInsert(b *testing.B) {
	srv := chserver.Start(b, chserver.Options{})
	cfg := testConfig(srv, "bench")
	cfg.QueueConfig.Get().BlockOnOverflow = true
	var views []sdkmetric.Option
	for _, name := range detailedOnly {
		views = append(views, sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: name}, sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}})))
	}
	exp, tt := startExporter(b, cfg, componenttest.WithMetricOptions(views...))
	ctx := context.Background()
	batches := benchLogs(8)
	// Warm up: create the table and a first part.
	warm := plog.NewLogs()
	batches[0].CopyTo(warm)
	if err := exp.ConsumeLogs(ctx, warm); err != nil {
		b.Fatal(err)
	}
	waitFor(b, 30*time.Second, "warm-up", func() bool {
		return metricSum(b, tt, "otelcol_exporter_clickhouse_flows_rows_written", "") == 1000
	})

	// The exporter owns what it is given (the batcher moves records out),
	// so every call gets its own copy, made before the clock starts.
	work := make([]plog.Logs, (b.N+999)/1000)
	for i := range work {
		work[i] = plog.NewLogs()
		batches[i%len(batches)].CopyTo(work[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0, srv0 := time.Now(), processCPU(b), serverCPU(b, srv)
	sent := 0
	for i := range work {
		if err := exp.ConsumeLogs(ctx, work[i]); err != nil {
			b.Fatal(err)
		}
		work[i] = plog.Logs{}
		sent += 1000
	}
	want := int64(1000 + sent)
	waitFor(b, 5*time.Minute, "all rows", func() bool {
		return metricSum(b, tt, "otelcol_exporter_clickhouse_flows_rows_written", "") >= want
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(sent), "cpu-ns/row")
	b.ReportMetric(float64(serverCPU(b, srv)-srv0)/float64(sent), "server-cpu-ns/row")
	b.ReportMetric(float64(metricSum(b, tt, "otelcol_exporter_clickhouse_flows_inserts", "")), "inserts")
}

// BenchmarkPushBatch measures one default-sized insert (20,000 rows) without
// the queue: decode, column building and the INSERT round trip.
func BenchmarkPushBatch(b *testing.B) {
	e, ld := startPushBench(b, "benchpush")
	ctx := context.Background()
	measureInserts(b, e.srv, func() {
		if err := e.pushLogs(ctx, ld); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkDriverFloor is what the driver needs for the rows of
// BenchmarkPushBatch, the floor PushBatch is measured against: PrepareBatch,
// Append of the pre-built column slices, Send, on the same server and table.
func BenchmarkDriverFloor(b *testing.B) {
	e, ld := startPushBench(b, "benchfloor")
	ctx := context.Background()
	block := flowtable.NewBlock(defaultMinRows)
	if bad, err := e.fillBlock(block, ld); bad > 0 {
		b.Fatal(err)
	}
	columns := block.Slices()
	if err := e.prepare(ctx); err != nil {
		b.Fatal(err)
	}
	measureInserts(b, e.srv, func() {
		batch, err := e.conn.PrepareBatch(ctx, e.insertSQL)
		if err != nil {
			b.Fatal(err)
		}
		for i, v := range columns {
			if err := batch.Column(i).Append(v); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			b.Fatal(err)
		}
	})
}

// pushBench is an exporter started against its own server, without the queue.
type pushBench struct {
	*flowsExporter
	srv *chserver.Server
}

// startPushBench starts an exporter on a local server writing table, and
// returns it with one default-sized batch of the benchmark records.
func startPushBench(b *testing.B, table string) (pushBench, plog.Logs) {
	srv := chserver.Start(b, chserver.Options{})
	e, err := newFlowsExporter(testConfig(srv, table), componenttest.NewNopTelemetrySettings())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := e.start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.shutdown(ctx) })
	ld := plog.NewLogs()
	for _, part := range benchLogs(defaultMinRows / 1000) {
		part.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	}
	return pushBench{e, srv}, ld
}

// measureInserts runs insert (one batch of defaultMinRows rows) b.N times and
// reports rows/s and the client's and the server's CPU time per row.
func measureInserts(b *testing.B, srv *chserver.Server, insert func()) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, srv0 := processCPU(b), serverCPU(b, srv)
	for range b.N {
		insert()
	}
	b.ReportMetric(float64(b.N*defaultMinRows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N*defaultMinRows), "cpu-ns/row")
	b.ReportMetric(float64(serverCPU(b, srv)-srv0)/float64(b.N*defaultMinRows), "server-cpu-ns/row")
}

// processCPU is the CPU time (user and system, all threads, GC included) this
// process has used: on a shared machine it is a steadier measure of the
// exporter's cost than wall-clock rows/s. The server is another process and
// is not counted.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBuildRow measures the CPU cost per record of decoding a LogRecord
// and adding it to a column block (no server), one record at a time
// (fillBlock adds them in chunks: BenchmarkFillBlock).
func BenchmarkBuildRow(b *testing.B) {
	ld := benchLogs(1)[0]
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	block := flowtable.NewBlock(lrs.Len())
	var rec flowrecord.Record
	var dec attrcodec.Decoder
	row := flowtable.Row{Record: &rec, ClusterUUID: "c"}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := range b.N {
		if err := dec.Decode(lrs.At(i%lrs.Len()), &rec); err != nil {
			b.Fatal(err)
		}
		block.Add(&row)
		if block.Len() == lrs.Len() {
			block.Reset()
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// serverCPU is the CPU time srv's clickhouse-server process has used (a child
// of this process, found through /proc), so that a benchmark can show how the
// cost of a row splits between the exporter and the server on shared cores.
func serverCPU(b *testing.B, srv *chserver.Server) time.Duration {
	const ticksPerSecond = 100 // USER_HZ; /proc/<pid>/stat counts in these
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		children, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(children)) {
			cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			if !bytes.Contains(cmdline, []byte(srv.Dir)) {
				continue
			}
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				b.Fatal(err)
			}
			// Fields after the parenthesised command name: utime is the
			// 12th, stime the 13th.
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			utime, _ := strconv.ParseInt(fields[11], 10, 64)
			stime, _ := strconv.ParseInt(fields[12], 10, 64)
			return time.Duration(utime+stime) * time.Second / ticksPerSecond
		}
	}
	b.Fatalf("no clickhouse-server process for %s among this process's children", srv.Dir)
	return 0
}
