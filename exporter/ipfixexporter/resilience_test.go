//go:build integration

package ipfixexporter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
	"github.com/flowtel/flowtel/testbed/ipfixcollector"
)

// counter sums a counter's data points whose reason (when given) matches.
func counter(t *testing.T, tt *componenttest.Telemetry, name, reason string) int64 {
	t.Helper()
	m, err := tt.GetMetric(name)
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if reason != "" {
			if v, ok := dp.Attributes.Value("reason"); !ok || v.AsString() != reason {
				continue
			}
		}
		n += dp.Value
	}
	return n
}

func ports(recs []ipfixcollector.Record) map[string]bool {
	m := map[string]bool{}
	for _, r := range recs {
		m[r.Fields["sourceTransportPort"]] = true
	}
	return m
}

// TestBadRecordsFailAlone: a record too long to encode and a log record that is
// not a flow fail alone, are counted with their reason, and the others arrive.
func TestBadRecordsFailAlone(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	e, tt := testExporter(t, testConfig(col.Endpoint(), TransportTCP, layout.Aggregate), nsDialer(col.Netns()))

	recs := recordsWithPorts(1000, 3)
	recs[1].Source.PodName = strings.Repeat("x", 70000) // over the 65535-byte IPFIX string limit
	ld := logsOf(recs...)
	notAFlow := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	notAFlow.Body().SetStr("hello")
	if err := e.pushLogs(context.Background(), ld); err != nil {
		t.Fatalf("push: %v", err)
	}
	waitRecords(t, col, 2)
	time.Sleep(200 * time.Millisecond) // a wrongly sent third record would arrive by now
	got, _ := col.Records()
	if p := ports(got); len(got) != 2 || !p["1000"] || !p["1002"] {
		t.Fatalf("collector got %d records with ports %v, want ports 1000 and 1002", len(got), p)
	}
	if n := counter(t, tt, "otelcol_exporter_ipfix_records_failed", reasonEncode); n != 1 {
		t.Errorf("failed{reason=encode} = %d, want 1", n)
	}
	if n := counter(t, tt, "otelcol_exporter_ipfix_records_failed", reasonDecode); n != 1 {
		t.Errorf("failed{reason=decode} = %d, want 1", n)
	}
	if n := counter(t, tt, "otelcol_exporter_ipfix_records_sent", ""); n != 2 {
		t.Errorf("sent = %d, want 2", n)
	}
}

// TestCollectorRestart: the collector goes away mid-stream and comes back; the
// exporter reconnects, resends the templates, and the records sent after the
// restart decode.
func TestCollectorRestart(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	e, tt := testExporter(t, testConfig(col.Endpoint(), TransportTCP, layout.Aggregate), nsDialer(col.Netns()))
	ctx := context.Background()

	if err := e.pushLogs(ctx, logsOf(recordsWithPorts(2000, 100)...)); err != nil {
		t.Fatal(err)
	}
	waitRecords(t, col, 100)
	col.Stop()

	// While it is down, pushes fail with a clear error and give the records back.
	err := e.pushLogs(ctx, logsOf(recordsWithPorts(3000, 10)...))
	for i := 0; err == nil && i < 20; i++ {
		time.Sleep(50 * time.Millisecond)
		err = e.pushLogs(ctx, logsOf(recordsWithPorts(3000, 10)...))
	}
	if err == nil || !strings.Contains(err.Error(), col.Endpoint()) {
		t.Fatalf("push to a stopped collector: err = %v, want an error naming the endpoint", err)
	}

	col.Restart(t)
	after := recordsWithPorts(4000, 50)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.pushLogs(ctx, logsOf(after...))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := waitRecords(t, col, 50)
	p := ports(got)
	for _, r := range after {
		if !p[fmt.Sprint(r.Source.Port)] {
			t.Fatalf("record with source port %d sent after the restart did not decode", r.Source.Port)
		}
	}
	if n := counter(t, tt, "otelcol_exporter_ipfix_connections", ""); n < 2 {
		t.Errorf("connections = %d, want at least 2 (a reconnection)", n)
	}
	if n := counter(t, tt, "otelcol_exporter_ipfix_templates_sent", ""); n < 4 {
		t.Errorf("templates sent = %d, want at least 4 (both templates, twice)", n)
	}
}

// TestUnacknowledgedMessagesAreResent: records written to the socket just
// before the collector dies, but never acknowledged by its host, are resent on
// the next connection and decode after the restart. The collector's namespace
// drops the exporter's segments (iptables) so that what is written stays
// unacknowledged; then the collector is killed and restarted. Duplicates are
// allowed (TCP's acknowledgement counter is a byte count, not a record count)
// and counted; loss is not.
func TestUnacknowledgedMessagesAreResent(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	e, tt := testExporter(t, testConfig(col.Endpoint(), TransportTCP, layout.Aggregate), nsDialer(col.Netns()))
	ctx := context.Background()
	if err := e.pushLogs(ctx, logsOf(recordsWithPorts(2000, 20)...)); err != nil {
		t.Fatal(err)
	}
	waitRecords(t, col, 20)

	drop := []string{"INPUT", "-p", "tcp", "--dport", fmt.Sprint(collectorPort), "-j", "DROP"}
	if _, err := col.Netns().Exec("iptables", append([]string{"-A"}, drop...)...); err != nil {
		t.Fatal(err)
	}
	unacked := recordsWithPorts(3000, 200)
	if err := e.pushLogs(ctx, logsOf(unacked...)); err != nil {
		t.Fatalf("push while segments are dropped (the kernel buffers them): %v", err)
	}
	if n, ok := e.conn.unacknowledged(); !ok || n == 0 {
		t.Fatalf("unacknowledged bytes = %d (known %t), want > 0: the drop rule did not hold the records back", n, ok)
	}
	col.Kill() // its host never acknowledged the records: they are not in it
	if _, err := col.Netns().Exec("iptables", append([]string{"-D"}, drop...)...); err != nil {
		t.Fatal(err)
	}
	col.Restart(t)

	after := recordsWithPorts(4000, 10)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := e.pushLogs(ctx, logsOf(after...))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := waitRecords(t, col, len(unacked)+len(after))
	seen := map[string]int{}
	for _, r := range got {
		seen[r.Fields["sourceTransportPort"]]++
	}
	duplicates := 0
	for _, r := range append(unacked, after...) {
		n := seen[fmt.Sprint(r.Source.Port)]
		if n == 0 {
			t.Errorf("record with source port %d was lost", r.Source.Port)
		}
		duplicates += max(n-1, 0)
	}
	t.Logf("%d records resent and decoded after the restart, %d duplicates", len(unacked), duplicates)
	if n := counter(t, tt, "otelcol_exporter_ipfix_records_lost", ""); n != 0 {
		t.Errorf("records.lost = %d, want 0", n)
	}
	if n := counter(t, tt, "otelcol_exporter_ipfix_records_resent", ""); n < int64(len(unacked)) {
		t.Errorf("records.resent = %d, want at least %d", n, len(unacked))
	}
}

// TestConcurrentPushes: pushes from several sending-queue consumers at once
// all arrive exactly once, and each message's sequence number counts the data
// records sent before it in the domain (RFC 7011 §3.1), although the
// consumers encode in parallel.
func TestConcurrentPushes(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	e, _ := testExporter(t, testConfig(col.Endpoint(), TransportTCP, layout.Aggregate), nsDialer(col.Netns()))
	const workers, batches, perBatch = 4, 5, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers*batches)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				recs := recordsWithPorts(10000+(w*batches+b)*perBatch, perBatch)
				if w%2 == 1 {
					for _, r := range recs {
						six := fullRecord(true)
						six.Source.Port = r.Source.Port
						*r = *six
					}
				}
				errs <- e.pushLogs(context.Background(), logsOf(recs...))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	const total = workers * batches * perBatch
	got := waitRecords(t, col, total)
	if len(got) != total {
		t.Fatalf("collector has %d records, want %d", len(got), total)
	}
	seen := map[string]int{}
	perSeq := map[uint32]int{} // records per message, by its sequence number
	for _, r := range got {
		seen[r.Fields["sourceTransportPort"]]++
		perSeq[r.SequenceNum]++
	}
	for p := 10000; p < 10000+total; p++ {
		if n := seen[fmt.Sprint(p)]; n != 1 {
			t.Errorf("record with source port %d arrived %d times", p, n)
		}
	}
	seqs := make([]uint32, 0, len(perSeq))
	for s := range perSeq {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	next := uint32(0)
	for _, s := range seqs {
		if s != next {
			t.Fatalf("message with sequence number %d, want %d (sequence numbers %v)", s, next, seqs)
		}
		next += uint32(perSeq[s])
	}
}

// TestBurstIsHeldNotRefused: a burst of small requests, one per Antrea agent
// message, arriving while the collector is away, is queued whole by the
// default sending queue and delivered once the collector is back. The queue
// counted requests (1000) and refused the rest ("sending queue is full").
func TestBurstIsHeldNotRefused(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	col.Stop()
	cfg := testConfig(col.Endpoint(), TransportTCP, layout.Aggregate)
	ctx := context.Background()
	exp, err := newLogsExporter(ctx, exportertest.NewNopSettings(metadata.Type), cfg, nsDialer(col.Netns()))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(ctx) }()

	const requests, perRequest = 3000, 1
	refused := 0
	var firstErr error
	for i := range requests {
		if err := exp.ConsumeLogs(ctx, logsOf(recordsWithPorts(10000+i*perRequest, perRequest)...)); err != nil {
			refused++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if refused > 0 {
		t.Fatalf("%d of %d requests refused (first: %v), want every one queued", refused, requests, firstErr)
	}
	col.Restart(t)
	got := waitRecords(t, col, requests*perRequest)
	if p := ports(got); len(p) != requests*perRequest {
		t.Fatalf("%d distinct records arrived, want %d", len(p), requests*perRequest)
	}
}
