//go:build integration

package flowstreamexporter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
)

// benchNamespaces is how many Namespaces the benchmark's rows are spread
// over: one Namespace's stream matches about 2/benchNamespaces of them.
const benchNamespaces = 100

// errFirstPage stops a history after its first page.
var errFirstPage = errors.New("first page received")

// BenchmarkHistoryFirstPage: the first page (batchSize flows) of a 7-day
// history for one Namespace, out of FLOWTEL_HISTORY_BENCH_ROWS rows
// (default 10,000,000) spread evenly over 7 days and 100 Namespaces, in the
// table the clickhouse_flows exporter creates, on one ClickHouse server.
// Target: under 1 s. The viewer discloses every endpoint in full (the tiers'
// cost per record is BenchmarkNamespacedStreamWarmCache's).
func BenchmarkHistoryFirstPage(b *testing.B) {
	rows := 10_000_000
	if s := os.Getenv("FLOWTEL_HISTORY_BENCH_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil {
			b.Fatalf("FLOWTEL_HISTORY_BENCH_ROWS: not a number (got %q)", s)
		}
	}
	store := startFlowStore(b)
	store.write(b) // the clickhouse_flows exporter creates the table
	now := time.Now().Truncate(time.Second)
	week := int64(7 * 24 * time.Hour / time.Second)
	loadStart := time.Now()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{store.srv.Addr()}, ReadTimeout: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	// Generated in ClickHouse: 10M rows through the client would take
	// minutes. Row n ends at start + n*week/rows, between Pods of
	// Namespaces n%100 and (n/100)%100.
	load := fmt.Sprintf(`INSERT INTO %s.flows (timeInserted, flowStartSeconds, flowEndSeconds, protocolIdentifier,
		sourceIP, sourceTransportPort, destinationIP, destinationTransportPort,
		sourcePodNamespace, sourcePodName, sourcePodLabels, sourceNodeName,
		destinationPodNamespace, destinationPodName, destinationPodLabels, destinationNodeName,
		destinationServicePortName, packetTotalCount, octetTotalCount, packetDeltaCount, octetDeltaCount, flowType, tcpState)
	SELECT toDateTime(e + 2), toDateTime(e - 60), toDateTime(e), 6,
		concat('10.', toString(number %% 250), '.', toString(intDiv(number, 250) %% 250), '.7'), 40000 + number %% 20000,
		concat('10.200.', toString(intDiv(number, 100) %% 250), '.9'), 8080,
		concat('ns-', toString(number %% %d)), concat('client-', toString(number %% 997)), '{"app":"client"}', concat('node-', toString(number %% 20)),
		concat('ns-', toString(intDiv(number, %d) %% %d)), concat('server-', toString(number %% 991)), '{"app":"server"}', concat('node-', toString(number %% 17)),
		'ns-x/web:http', 10 + number %% 90, 1000 + number %% 100000, 2, 200, 2, 'ESTABLISHED'
	FROM (SELECT number, %d + intDiv(number * %d, %d) AS e FROM system.numbers LIMIT %d)`,
		historyDB, benchNamespaces, benchNamespaces, benchNamespaces, now.Unix()-week, week, rows, rows)
	if err := conn.Exec(context.Background(), load); err != nil {
		b.Fatalf("loading %d rows: %v", rows, err)
	}
	// A week of flows is merged by the time it is read; merging now keeps
	// the server's background merges out of the timing.
	if err := conn.Exec(context.Background(), fmt.Sprintf("OPTIMIZE TABLE %s.flows FINAL", historyDB)); err != nil {
		b.Fatalf("merging: %v", err)
	}
	b.Logf("loaded and merged %d rows in %s", rows, time.Since(loadStart).Round(time.Millisecond))

	tel, err := metadata.NewTelemetryBuilder(exportertest.NewNopSettings(metadata.Type).TelemetrySettings)
	if err != nil {
		b.Fatal(err)
	}
	cfg := createDefaultConfig().(*Config)
	withHistory(store, cfg.History.MaxRows)(cfg)
	h, err := openHistory(context.Background(), &cfg.History, tel)
	if err != nil {
		b.Fatal(err)
	}
	defer h.close()
	q, err := parseRequest(&pb.GetFlowsRequest{Namespaces: []string{"ns-42"}, Since: timestamppb.New(now.Add(-7 * 24 * time.Hour))})
	if err != nil {
		b.Fatal(err)
	}
	v := &viewer{scope: q.scope}
	r := newRing(16)
	planStart := time.Now()
	c, err := h.planChunk(context.Background(), historyWhere(q, q.since.Unix()), q.since.Unix(), batchSize)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("planning the first chunk (%d rows): %s", c.rows, time.Since(planStart).Round(time.Millisecond))
	b.ResetTimer()
	for b.Loop() {
		var first []*pb.Flow
		_, err := h.serve(context.Background(), q, v, r.token(0), fingerprints{}, time.Time{}, func(resp *pb.GetFlowsResponse) error {
			first = resp.Flows
			return errFirstPage
		})
		if !errors.Is(err, errFirstPage) {
			b.Fatalf("history: %v", err)
		}
		if len(first) != batchSize {
			b.Fatalf("first page: %d flows, want %d", len(first), batchSize)
		}
		if k := first[0].K8S; k.SourcePodNamespace != "ns-42" && k.DestinationPodNamespace != "ns-42" {
			b.Fatalf("first flow is not in ns-42: %s -> %s", k.SourcePodNamespace, k.DestinationPodNamespace)
		}
	}
}
