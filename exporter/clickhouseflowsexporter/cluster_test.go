//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

const testCluster = "flows_cluster"

// TestCluster runs the clustered schema's tests on one cluster of 2 shards
// x 2 replicas (and one ZooKeeper), each subtest in a database of its own.
// The one that stops servers runs first, while the servers hold the fewest
// tables: a restarted server loads every replicated table from ZooKeeper
// before it listens.
func TestCluster(t *testing.T) {
	c := chserver.StartCluster(t, chserver.ClusterOptions{Name: testCluster, Shards: 2, Replicas: 2})
	t.Run("ServersDown", func(t *testing.T) { testClusterServersDown(t, c) })
	t.Run("SchemaFromNothing", func(t *testing.T) { testClusterSchemaFromNothing(t, c) })
	t.Run("TheiaSchema", func(t *testing.T) { testClusterTheiaSchema(t, c) })
	t.Run("OlderFlowtelSchema", func(t *testing.T) { testClusterOlderFlowtelSchema(t, c) })
	t.Run("NotDistributed", func(t *testing.T) { testClusterNotDistributed(t, c) })
	t.Run("ConcurrentWriters", func(t *testing.T) { testClusterConcurrentWriters(t, c) })
	t.Run("DedupWindow", func(t *testing.T) { testClusterDedupWindow(t, c) })
}

// clusterConfig is testConfig on srv with the cluster set.
func clusterConfig(srv *chserver.Server, database string) *Config {
	cfg := testConfig(srv, database)
	cfg.Cluster = testCluster
	return cfg
}

// onCluster runs an ON CLUSTER statement, reading the row per server it
// answers with.
func onCluster(t testing.TB, conn driver.Conn, q string) {
	t.Helper()
	rows, err := conn.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	rows.Close()
}

// engines are the engines of database's tables on conn's server, by name.
func engines(t testing.TB, conn driver.Conn, database string) map[string]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT name, engine FROM system.tables WHERE database = '"+database+"'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, e string
		if err := rows.Scan(&n, &e); err != nil {
			t.Fatal(err)
		}
		out[n] = e
	}
	return out
}

// wantClusterSchema checks that every server has the clustered schema in
// database: the tables with their engines, and flowtel's columns.
func wantClusterSchema(t *testing.T, c *chserver.Cluster, database string) {
	t.Helper()
	want := map[string]string{"flows_local": "ReplicatedMergeTree", "flows": "Distributed"}
	for _, v := range flowtable.Views {
		want[v.Table] = "ReplicatedSummingMergeTree"
		want[v.Name+"_local"] = "MaterializedView"
		want[v.Name] = "Distributed"
	}
	for _, srv := range c.All() {
		conn := client(t, srv)
		got := engines(t, conn, database)
		for name, engine := range want {
			if got[name] != engine {
				t.Errorf("%s: %s.%s engine %q, want %q", srv.Addr(), database, name, got[name], engine)
			}
		}
		for _, table := range []string{"flows_local", "flows"} {
			have := map[string]bool{}
			for _, n := range names(columnsOf(t, conn, database, table)) {
				have[n] = true
			}
			if m := flowtable.Missing(have); len(m) > 0 {
				t.Errorf("%s: %s.%s lacks %s", srv.Addr(), database, table, columnList(m))
			}
		}
	}
}

// The schema from nothing: every server has the replicated local tables,
// the Distributed tables and Theia's views; a second start finds them (and
// creates nothing twice); every documented query gives on the cluster what
// it gives on one server.
func testClusterSchemaFromNothing(t *testing.T, c *chserver.Cluster) {
	cfg := clusterConfig(c.Servers[0][0], "fresh")
	startExporter(t, cfg)
	wantClusterSchema(t, c, "fresh")

	// Started again, on another server: everything is there already.
	exp, _ := startExporter(t, clusterConfig(c.Servers[1][1], "fresh"))
	minute := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", queryRecords(minute)...)); err != nil {
		t.Fatal(err)
	}
	checkQueries(t, c.Servers[0][1].Addr(), "fresh", minute)
}

// Theia's clustered schema (flows over flows_local, rows at random, no
// egressNodeName nor flowtel's columns) gets the missing columns on every
// server, local table first, and the views; its rows stay.
func testClusterTheiaSchema(t *testing.T, c *chserver.Cluster) {
	conn := client(t, c.Servers[0][0])
	onCluster(t, conn, "CREATE DATABASE theia ON CLUSTER "+testCluster)
	ddl := theiaDDL(t)
	ddl = strings.Replace(ddl, "{table}", "theia.flows_local ON CLUSTER "+testCluster, 1)
	ddl = strings.Replace(ddl, "ENGINE = MergeTree()", "ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/theia/flows_local', '{replica}')", 1)
	onCluster(t, conn, ddl)
	onCluster(t, conn, "CREATE TABLE theia.flows ON CLUSTER "+testCluster+" AS theia.flows_local ENGINE = Distributed('{cluster}', theia, flows_local, rand())")
	exec(t, conn, "INSERT INTO theia.flows_local (sourceIP, destinationIP, sourcePodName, egressIP, trusted) SELECT '10.0.0.1', '10.0.0.2', 'old-pod', '192.0.2.1', 1")

	exp, _ := startExporter(t, clusterConfig(c.Servers[0][0], "theia"))
	wantClusterSchema(t, c, "theia")
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", queryRecords(time.Now().UTC().Add(-time.Minute))...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "6 rows", func() bool { return count(t, conn, "SELECT count() FROM theia.flows") == 6 })
	if n := count(t, conn, "SELECT count() FROM theia.flows WHERE sourcePodName = 'old-pod' AND trusted = 1 AND egressNodeName = ''"); n != 1 {
		t.Errorf("Theia's row: %d, want 1 with the new columns empty", n)
	}
	// Theia's own columns were kept, in Theia's order, flowtel's appended.
	theia := columnsOf(t, conn, "theia", "flows_local")
	if !slices.Contains(theia, "trusted UInt8") || names(theia)[len(names(theia))-1] != flowtable.Columns[len(flowtable.Columns)-1].Name {
		t.Errorf("columns of the altered local table: %v", theia)
	}
}

// theiaDDL is Theia's flows table DDL with {table} for the name.
func theiaDDL(t *testing.T) string {
	t.Helper()
	ddl, err := os.ReadFile("testdata/theia/flows.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(ddl)
}

// An older flowtel's clustered schema (the local and the Distributed table
// without the newest columns) gets them; rows written before stay.
func testClusterOlderFlowtelSchema(t *testing.T, c *chserver.Cluster) {
	conn := client(t, c.Servers[1][0])
	newest := flowtable.Columns[len(flowtable.Columns)-2:]
	cl := flowtable.Cluster{Name: testCluster, Database: "older"}
	onCluster(t, conn, cl.CreateDatabase())
	older := cl.CreateLocalTable("flows", 0)
	for _, col := range newest {
		older = strings.Replace(older, ",\n    "+col.Name+" "+col.Type, "", 1)
	}
	onCluster(t, conn, older)
	onCluster(t, conn, cl.CreateDistributed("flows", flowtable.ShardingKey))
	if n := len(columnsOf(t, conn, "older", "flows")); n != len(flowtable.Columns)+2-len(newest) {
		t.Fatalf("the older table has %d columns", n)
	}
	exec(t, conn, "INSERT INTO older.flows_local (sourcePodName) SELECT 'before'")

	exp, _ := startExporter(t, clusterConfig(c.Servers[1][0], "older"))
	wantClusterSchema(t, c, "older")
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", intraNodeRecord())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "2 rows", func() bool { return count(t, conn, "SELECT count() FROM older.flows") == 2 })
	if n := count(t, conn, "SELECT count() FROM older.flows WHERE sourcePodName = 'before'"); n != 1 {
		t.Errorf("%d rows written before the migration, want 1", n)
	}
}

// connRecord is a record of a connection told apart by n (its source
// address and port), n+1 bytes.
func connRecord(writer, n int) *flowrecord.Record {
	r := intraNodeRecord()
	r.Source.Address = netip.AddrFrom4([4]byte{10, byte(writer), byte(n >> 8), byte(n)})
	r.Source.Port = uint16(10000 + n)
	r.Stats.OctetDelta = uint64(n + 1)
	r.End = time.Now().UTC()
	return r
}

// streamConnections sends batches of connection records of writer through
// exp, one every pause, batches of them or until stop is closed, and
// returns how many.
func streamConnections(t *testing.T, exp exporter.Logs, writer, batches, perBatch int, pause time.Duration, stop <-chan struct{}) int {
	t.Helper()
	n := 0
	for b := 0; b < batches || batches == 0; b++ {
		select {
		case <-stop:
			return n
		default:
		}
		recs := make([]*flowrecord.Record, perBatch)
		for i := range recs {
			recs[i] = connRecord(writer, n)
			n++
		}
		if err := exp.ConsumeLogs(context.Background(), logsOf("c", recs...)); err != nil {
			t.Errorf("writer %d: %v", writer, err)
		}
		time.Sleep(pause)
	}
	return n
}

// wantEachConnectionOnce checks that database holds each of the writers'
// connections exactly once, on one shard, on both its replicas, and that the
// pod view sums their bytes once.
func wantEachConnectionOnce(t *testing.T, c *chserver.Cluster, database string, perWriter map[int]int) {
	t.Helper()
	total, bytes := uint64(0), uint64(0)
	for _, n := range perWriter {
		total += uint64(n)
		bytes += uint64(n) * uint64(n+1) / 2
	}
	// Every replica has its shard's rows once replication caught up.
	var shardRows []uint64
	for s, replicas := range c.Servers {
		var counts []uint64
		for _, srv := range replicas {
			conn := client(t, srv)
			exec(t, conn, "SYSTEM SYNC REPLICA "+database+".flows_local")
			counts = append(counts, count(t, conn, "SELECT count() FROM "+database+".flows_local"))
		}
		if slices.Min(counts) != slices.Max(counts) {
			t.Errorf("shard %d: replicas have %v rows", s+1, counts)
		}
		shardRows = append(shardRows, counts[0])
	}
	conn := client(t, c.Servers[0][0])
	q := fmt.Sprintf("SELECT count() FROM %s.flows", database)
	if n := count(t, conn, q); n != total {
		t.Errorf("%d rows, want %d (shards %v)", n, total, shardRows)
	}
	if n := count(t, conn, "SELECT uniqExact(sourceIP, sourceTransportPort) FROM "+database+".flows"); n != total {
		t.Errorf("%d connections, want %d", n, total)
	}
	if shardRows[0] == 0 || shardRows[1] == 0 {
		t.Errorf("rows per shard %v: one shard has none", shardRows)
	}
	if n := count(t, conn, "SELECT sum(octetDeltaCount) FROM "+database+".flows_pod_view"); n != bytes {
		t.Errorf("the pod view sums %d bytes, want %d", n, bytes)
	}
}

// Several gateway replicas, each with its own exporter on another server,
// write at once: every connection is there once.
func testClusterConcurrentWriters(t *testing.T, c *chserver.Cluster) {
	servers := c.All()[:3]
	perWriter := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var tts []*componenttest.Telemetry
	for w, srv := range servers {
		cfg := clusterConfig(srv, "concurrent")
		exp, tt := startExporter(t, cfg)
		tts = append(tts, tt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := streamConnections(t, exp, w+1, 20, 50, 20*time.Millisecond, nil)
			mu.Lock()
			perWriter[w+1] = n
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, h := range tts {
		if n := writtenAfter(t, h, int64(perWriter[i+1])); n != int64(perWriter[i+1]) {
			t.Fatalf("writer %d wrote %d rows, want %d", i+1, n, perWriter[i+1])
		}
	}
	wantEachConnectionOnce(t, c, "concurrent", perWriter)
}

// A replica, then a whole shard, stop while an exporter streams records:
// inserts fail and are retried (and counted), and once the servers are back
// every connection is there exactly once, on both replicas of its shard.
// (On 18.16 the shard's outage fails inserts before the other shard commits
// its part: see testClusterDedupWindow.)
func testClusterServersDown(t *testing.T, c *chserver.Cluster) {
	cfg := clusterConfig(c.Servers[0][0], "outage")
	q := cfg.QueueConfig.Get()
	b := q.Batch.Get()
	b.FlushTimeout, b.MinSize = 100*time.Millisecond, 100
	exp, tt := startExporter(t, cfg)

	sent, stop := make(chan int), make(chan struct{})
	go func() { sent <- streamConnections(t, exp, 1, 0, 20, 100*time.Millisecond, stop) }()
	written := func() int64 { return metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_written", "") }
	failed := func() int64 { return metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_insert_failed", "") }
	shard2 := c.Servers[1]
	waitFor(t, 20*time.Second, "rows written", func() bool { return written() > 0 })
	t.Log("stopping a replica of shard 2")
	shard2[0].Stop() // a replica: its shard's rows go to the other one
	// A gateway replica starting meanwhile finds the schema in place and
	// runs no ON CLUSTER statement, which would wait for the stopped server.
	began := time.Now()
	startExporter(t, clusterConfig(c.Servers[0][1], "outage"))
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("an exporter took %s to start with a server down", d)
	}
	before := written()
	waitFor(t, 20*time.Second, "rows written without a replica", func() bool { return written() > before+200 })
	t.Log("restarting it, stopping shard 2")
	shard2[0].Restart()
	shard2[0].Stop() // the whole shard: inserts fail until it is back
	shard2[1].Stop()
	waitFor(t, 20*time.Second, "failed inserts", func() bool { return failed() > 0 })
	time.Sleep(time.Second)
	t.Log("restarting shard 2")
	shard2[0].Restart()
	shard2[1].Restart()
	before = written()
	waitFor(t, 60*time.Second, "rows written after the shard's return", func() bool { return written() > before+200 })
	close(stop)
	n := <-sent
	t.Log("stream stopped")

	waitFor(t, 90*time.Second, fmt.Sprintf("%d rows written", n), func() bool { return written() >= int64(n) })
	if got := written(); got != int64(n) {
		t.Errorf("rows_written %d, want %d", got, n)
	}
	t.Logf("%d rows sent in batches of 20 records; %d rows of failed inserts retried", n, failed())
	wantEachConnectionOnce(t, c, "outage", map[int]int{1: n})
}

// With cluster set, a flows table that is not Distributed is refused at
// start, with the reason.
func testClusterNotDistributed(t *testing.T, c *chserver.Cluster) {
	conn := client(t, c.Servers[0][0])
	exec(t, conn, "CREATE DATABASE plain")
	exec(t, conn, flowtable.CreateTable("plain", "flows", 0))
	wantAll(t, startErr(t, clusterConfig(c.Servers[0][0], "plain")),
		"table: cluster is set, but `plain`.`flows` is not a Distributed table (got engine \"MergeTree", "point table at the Distributed table")
}

// withFastCleanup is a replicated table's DDL with its cleanup every
// second: ClickHouse forgets the blocks beyond replicated_deduplication_window
// in a cleanup that runs every 30-40 s by default.
func withFastCleanup(stmt string) string {
	const fast = "cleanup_delay_period = 1, cleanup_delay_period_random_add = 0"
	if !strings.Contains(stmt, "ENGINE = Replicated") {
		return stmt
	}
	if strings.Contains(stmt, "\nSETTINGS ") {
		return strings.Replace(stmt, "\nSETTINGS ", "\nSETTINGS "+fast+", ", 1)
	}
	return stmt + "\nSETTINGS " + fast
}

// shard1Conns are n connection numbers of writer (connRecord) whose rows
// the sharding key sends to the first shard.
func shard1Conns(t *testing.T, conn driver.Conn, writer, n int) []int {
	t.Helper()
	q := fmt.Sprintf("SELECT number FROM system.numbers WHERE cityHash64("+
		"concat('10.%d.', toString(intDiv(number, 256)), '.', toString(number %% 256)), '10.10.0.9', "+
		"toUInt16(10000 + number), toUInt16(8080), toUInt8(6)) %% 2 = 0 LIMIT %d", writer, n)
	rows, err := conn.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v uint64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, int(v))
	}
	return out
}

// The deduplication window (issue 42.13): could a batch that a shard took
// before the insert failed elsewhere be retried after more than
// replicated_deduplication_window (default 100) other blocks reached that
// shard, and be written there twice? Not during a shard outage on
// ClickHouse 18.16: with insert_distributed_sync a shard that is down fails
// the whole insert before any shard commits its part (each shard's rows are
// committed only once every shard has received its own), and it fails every
// other gateway's insert too, even one with no rows for that shard. So no
// block reaches shard 1 while shard 2 is down, and once it is back gateway
// A's retried batch is there once.
func testClusterDedupWindow(t *testing.T, c *chserver.Cluster) {
	const db, nA = "dedupwin", 20
	conn := client(t, c.Servers[0][0])
	cl := flowtable.Cluster{Name: testCluster, Database: db}
	onCluster(t, conn, cl.CreateDatabase())
	// flowtel's schema as the exporter creates it, cleaned up every second.
	stmts := append([]string{cl.CreateLocalTable("flows", 0), cl.CreateDistributed("flows", flowtable.ShardingKey)}, cl.ViewStatements("flows", 0)...)
	for _, st := range stmts {
		onCluster(t, conn, withFastCleanup(st))
	}

	cfgA := clusterConfig(c.Servers[0][0], db)
	b := cfgA.QueueConfig.Get().Batch.Get()
	b.FlushTimeout, b.MinSize = 100*time.Millisecond, 100
	a, ttA := startExporter(t, cfgA)
	cfgB := clusterConfig(c.Servers[0][1], db)
	cfgB.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]() // one ConsumeLogs, one insert, one block
	cfgB.RetryConfig.Enabled = false
	gwB, ttB := startExporter(t, cfgB)
	written := func(tt *componenttest.Telemetry) int64 {
		return metricSum(t, tt, "otelcol_exporter_clickhouse_flows_rows_written", "")
	}
	rowsA := func() uint64 {
		var n uint64
		for _, srv := range c.Servers[0] {
			n += count(t, client(t, srv), "SELECT count() FROM "+db+".flows_local WHERE sourceIP LIKE '10.1.%'")
		}
		return n
	}

	connsB := shard1Conns(t, conn, 2, 2)
	wantBytes := uint64(connsB[0] + 1)
	if err := gwB.ConsumeLogs(context.Background(), logsOf("c", connRecord(2, connsB[0]))); err != nil {
		t.Fatalf("gateway B: %v", err)
	}
	if n := count(t, client(t, c.Servers[1][0]), "SELECT count() FROM "+db+".flows_local"); n != 0 {
		t.Fatalf("gateway B's row went to shard 2")
	}

	shard2 := c.Servers[1]
	shard2[0].Stop()
	shard2[1].Stop()
	recsA := make([]*flowrecord.Record, nA)
	for i := range recsA {
		recsA[i] = connRecord(1, i)
		wantBytes += uint64(i + 1)
	}
	if err := a.ConsumeLogs(context.Background(), logsOf("c", recsA...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "gateway A's insert failing", func() bool {
		return metricSum(t, ttA, "otelcol_exporter_clickhouse_flows_rows_insert_failed", "") > 0
	})
	time.Sleep(time.Second)
	if n := rowsA(); n != 0 {
		t.Fatalf("shard 1 kept %d rows of gateway A's failed insert", n)
	}
	t.Logf("gateway A's batch of %d rows failed with shard 2 down; shard 1 kept none of them", nA)

	// Nor can gateway B write blocks to shard 1 meanwhile: its batch, all
	// of whose rows go to shard 1, fails the same way.
	if err := gwB.ConsumeLogs(context.Background(), logsOf("c", connRecord(2, connsB[1]))); err == nil {
		t.Fatal("gateway B wrote with shard 2 down")
	}
	if n := count(t, conn, "SELECT count() FROM "+db+".flows_local"); n != 1 {
		t.Fatalf("shard 1 has %d rows, want gateway B's first one", n)
	}
	t.Log("gateway B's batch for shard 1 only failed too; shard 1 kept nothing")

	shard2[0].Restart()
	shard2[1].Restart()
	waitFor(t, 60*time.Second, "gateway A's batch written", func() bool { return written(ttA) == nA })
	if n := written(ttB); n != 1 {
		t.Errorf("gateway B wrote %d rows, want 1", n)
	}
	for _, replicas := range c.Servers {
		for _, srv := range replicas {
			for _, table := range []string{"flows_local", "pod_view_table_local"} {
				exec(t, client(t, srv), "SYSTEM SYNC REPLICA "+db+"."+table)
			}
		}
	}
	if n := count(t, conn, "SELECT count() FROM "+db+".flows WHERE sourceIP LIKE '10.1.%'"); n != nA {
		t.Errorf("gateway A's batch: %d rows, want %d", n, nA)
	}
	if n := count(t, conn, "SELECT count() FROM "+db+".flows"); n != nA+1 {
		t.Errorf("%d rows, want %d", n, nA+1)
	}
	if n := count(t, conn, "SELECT sum(octetDeltaCount) FROM "+db+".flows_pod_view"); n != wantBytes {
		t.Errorf("the pod view sums %d bytes, want %d", n, wantBytes)
	}
}
