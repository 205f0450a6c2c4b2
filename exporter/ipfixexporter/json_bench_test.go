package ipfixexporter

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/internal/benchcpu"
)

// listenTCP accepts connections on loopback and hands each to serve.
func listenTCP(tb testing.TB, serve func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
			_ = c.Close()
		}
	}()
	tb.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

// TestJSONLines: format json writes one newline-terminated object per record,
// {"@timestamp": ..., "ipfix": {<IE name>: value}}, with every IE of the layout.
func TestJSONLines(t *testing.T) {
	lines := make(chan []byte, 4)
	addr := listenTCP(t, func(c net.Conn) {
		s := bufio.NewScanner(c)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			lines <- append([]byte(nil), s.Bytes()...)
		}
	})
	cfg := testConfig(addr, TransportTCP, layout.Aggregate)
	cfg.Format = FormatJSON
	e, _ := testExporter(t, cfg, nil)
	r := fullRecord(true)
	if err := e.pushLogs(context.Background(), logsOf(r)); err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Timestamp string         `json:"@timestamp"`
		IPFIX     map[string]any `json:"ipfix"`
	}
	if err := json.Unmarshal(<-lines, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Timestamp == "" || len(obj.IPFIX) != 70 {
		t.Fatalf("timestamp %q, %d IEs (want 70)", obj.Timestamp, len(obj.IPFIX))
	}
	want := expected(r, testClusterUUID)
	for _, name := range []string{"sourceIPv6Address", "sourcePodName", "destinationPodLabels", "sourcePodLabels", "clusterId", "egressIP"} {
		if obj.IPFIX[name] != want[name] {
			t.Errorf("%s = %v, want %q", name, obj.IPFIX[name], want[name])
		}
	}
	if obj.IPFIX["octetTotalCount"] != float64(r.Stats.OctetTotal) || obj.IPFIX["flowType"] != float64(r.FlowType) {
		t.Errorf("numbers: octetTotalCount %v flowType %v", obj.IPFIX["octetTotalCount"], obj.IPFIX["flowType"])
	}
}

// BenchmarkExportAggregateTCP measures records/s from plog to a local TCP
// collector that reads and discards the stream (aggregate layout, batches of
// 1000 records, as the sending queue's batcher delivers them).
func BenchmarkExportAggregateTCP(b *testing.B) {
	var received atomic.Int64
	addr := listenTCP(b, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received.Add(n)
	})
	cfg := testConfig(addr, TransportTCP, layout.Aggregate)
	e, _ := testExporter(b, cfg, nil)
	const batch = 1000
	recs := recordsWithPorts(1, batch)
	ld := logsOf(recs...)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		if err := e.pushLogs(ctx, ld); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRecords(b, b.N*batch, benchcpu.Now()-cpu0)
}

// BenchmarkExportAggregateTCPParallel is BenchmarkExportAggregateTCP with as
// many concurrent pushes as GOMAXPROCS, as the sending queue's consumers
// deliver them: decoding and encoding run in parallel, writes are serialised.
func BenchmarkExportAggregateTCPParallel(b *testing.B) {
	addr := listenTCP(b, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	e, _ := testExporter(b, testConfig(addr, TransportTCP, layout.Aggregate), nil)
	const batch = 1000
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchcpu.Now()
	b.RunParallel(func(pb *testing.PB) {
		ld := logsOf(recordsWithPorts(1, batch)...) // each consumer has its own batch
		for pb.Next() {
			if err := e.pushLogs(ctx, ld); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportRecords(b, b.N*batch, benchcpu.Now()-cpu0)
}

// reportRecords reports records/s and ns/record (wall) and, steadier on a
// shared machine, the CPU time per record (the discarding sink's included)
// and what it gives on one core.
func reportRecords(b *testing.B, n int, cpu time.Duration) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/record")
	b.ReportMetric(float64(n)/cpu.Seconds(), "records/cpu-s")
}
