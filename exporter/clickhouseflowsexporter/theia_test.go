//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// createTheiaTable creates database.table as Theia creates its flows table
// (testdata/theia/flows.sql).
func createTheiaTable(t *testing.T, conn driver.Conn, database, table string) {
	t.Helper()
	ddl, err := os.ReadFile("testdata/theia/flows.sql")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, conn, "CREATE DATABASE IF NOT EXISTS "+database)
	exec(t, conn, strings.ReplaceAll(string(ddl), "{table}", database+"."+table))
}

// columnsOf is a table's columns as "name type", in table order.
func columnsOf(t *testing.T, conn driver.Conn, database, table string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT name, type FROM system.columns WHERE database = '"+database+"' AND table = '"+table+"'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		out = append(out, n+" "+ty)
	}
	return out
}

func names(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i], _, _ = strings.Cut(c, " ")
	}
	return out
}

// The views and their tables exist as docs/clickhouse.md's "Theia's views"
// table says: engines, columns in order, types those of the flows table.
func TestTheiaViewsAsDocumented(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	startExporter(t, testConfig(srv, "views"))
	conn := client(t, srv)

	doc, err := os.ReadFile("../../docs/clickhouse.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(flows_\\w+_view)` \\| `(\\w+)` \\| ([^|]+) \\| ([^|]+) \\|$")
	rows := row.FindAllStringSubmatch(string(doc), -1)
	if len(rows) != 3 {
		t.Fatalf("docs/clickhouse.md documents %d views, want 3", len(rows))
	}
	flowsType := map[string]string{}
	for _, c := range columnsOf(t, conn, "views", "flows") {
		n, ty, _ := strings.Cut(c, " ")
		flowsType[n] = ty
	}
	engine := func(name string) string {
		var e string
		if err := conn.QueryRow(context.Background(), "SELECT engine FROM system.tables WHERE database = 'views' AND name = '"+name+"'").Scan(&e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return e
	}
	for _, r := range rows {
		view, table := r[1], r[2]
		keys, sums := strings.Split(r[3], ", "), strings.Split(r[4], ", ")
		if keys[0] != "timeInserted" || keys[len(keys)-1] != "clusterUUID" {
			t.Fatalf("%s: documented key %v", view, keys)
		}
		var want []string
		for _, c := range append(append(keys[:len(keys)-1:len(keys)-1], sums...), "clusterUUID") {
			want = append(want, c+" "+flowsType[c])
		}
		if got := columnsOf(t, conn, "views", table); !slices.Equal(got, want) {
			t.Errorf("%s columns\n%v\nwant\n%v", table, got, want)
		}
		if got := columnsOf(t, conn, "views", view); !slices.Equal(got, want) {
			t.Errorf("%s columns\n%v\nwant\n%v", view, got, want)
		}
		if e := engine(table); e != "SummingMergeTree" {
			t.Errorf("%s engine %s", table, e)
		}
		if e := engine(view); e != "MaterializedView" {
			t.Errorf("%s engine %s", view, e)
		}
		var sortingKey string // system.tables has no sorting_key on 18.16: read the DDL
		if err := conn.QueryRow(context.Background(), "SELECT create_table_query FROM system.tables WHERE database = 'views' AND name = '"+table+"'").Scan(&sortingKey); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(sortingKey, "ORDER BY ("+strings.Join(keys, ", ")+")") {
			t.Errorf("%s: key is not %v:\n%s", table, keys, sortingKey)
		}
	}

	// A second start finds everything in place (IF NOT EXISTS) and writes.
	exp, _ := startExporter(t, testConfig(srv, "views"))
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", intraNodeRecord(), interNodePairedRecord())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "both records summed in flows_pod_view", func() bool {
		return count(t, conn, "SELECT sum(octetDeltaCount) FROM views.flows_pod_view") == 400+320
	})

	// theia_views: false creates the table only.
	cfg := testConfig(srv, "noviews")
	cfg.TheiaViews = false
	startExporter(t, cfg)
	if n := count(t, conn, "SELECT count() FROM system.tables WHERE database = 'noviews'"); n != 1 {
		t.Errorf("theia_views: false: %d tables, want only flows", n)
	}
}

// A fresh Theia table is flowtel's table's prefix: altered as the start-up
// error says, it has flowtel's columns in flowtel's order, so SELECT * and
// positional INSERT … SELECT * work both ways; and an unaltered Theia table
// copies into flowtel's by naming its 52 columns.
func TestTheiaColumnOrder(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	conn := client(t, srv)
	createTheiaTable(t, conn, "theia", "flows")
	createTheiaTable(t, conn, "theia_old", "flows")
	exec(t, conn, "INSERT INTO theia_old.flows (sourceIP, destinationIP, sourcePodName, egressIP, trusted) SELECT '10.0.0.1', '10.0.0.2', 'old-pod', '192.0.2.1', 1")
	startExporter(t, testConfig(srv, "fresh")) // flowtel's table, created
	theia := columnsOf(t, conn, "theia", "flows")
	fresh := columnsOf(t, conn, "fresh", "flows")
	if len(theia) != 52 || !slices.Equal(fresh[:52], theia) {
		t.Fatalf("flowtel's table does not start with Theia's columns:\n%v\n%v", fresh, theia)
	}

	cfg := testConfig(srv, "theia")
	cfg.CreateSchema = false
	err := startErr(t, cfg)
	alter := regexp.MustCompile("add them with: (ALTER TABLE .*)$").FindStringSubmatch(err.Error())
	if alter == nil || !strings.Contains(alter[1], "ADD COLUMN egressNodeName String, ADD COLUMN sourceEndpointKind String") {
		t.Fatalf("start error %v", err)
	}
	exec(t, conn, alter[1])
	if got := columnsOf(t, conn, "theia", "flows"); !slices.Equal(got, fresh) {
		t.Fatalf("altered Theia table\n%v\nwant flowtel's\n%v", got, fresh)
	}
	exp, _ := startExporter(t, cfg)
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", toExternalRecord())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the row", func() bool { return count(t, conn, "SELECT count() FROM theia.flows") == 1 })

	exec(t, conn, "INSERT INTO fresh.flows SELECT * FROM theia.flows")
	exec(t, conn, "INSERT INTO fresh.flows ("+strings.Join(names(theia), ", ")+") SELECT * FROM theia_old.flows")
	exec(t, conn, "INSERT INTO theia.flows SELECT * FROM fresh.flows WHERE sourcePodName = 'old-pod'")
	got := runQuery(t, conn, "SELECT sourcePodName, egressIP, egressNodeName, trusted, correlationState FROM fresh.flows ORDER BY sourcePodName")
	want := []string{"checkout-1 192.0.2.10 node-d 0 not_required", "old-pod 192.0.2.1  1 "}
	if !slices.Equal(got, want) {
		t.Errorf("copied rows %q, want %q", got, want)
	}
	if n := count(t, conn, "SELECT count() FROM theia.flows WHERE sourcePodName = 'old-pod' AND trusted = 1"); n != 1 {
		t.Errorf("%d rows copied back into the Theia table", n)
	}
}

// On Theia's clustered schema (flows is Distributed over flows_local) the
// start-up error names the local table first, then the Distributed one, ON
// CLUSTER; altering in the wrong order is detected; in the right order
// inserts reach flows_local.
func TestTheiaClustered(t *testing.T) {
	const cluster = "flowtel_test"
	srv := chserver.Start(t, chserver.Options{Cluster: cluster})
	conn := client(t, srv)
	createTheiaTable(t, conn, "theia", "flows_local")
	exec(t, conn, "CREATE TABLE theia.flows AS theia.flows_local ENGINE = Distributed('{cluster}', theia, flows_local, rand())")
	cfg := testConfig(srv, "theia") // create_schema: true, as by default

	err := startErr(t, cfg)
	local := "ALTER TABLE `theia`.`flows_local` ON CLUSTER `" + cluster + "` ADD COLUMN egressNodeName String, "
	dist := "ALTER TABLE `theia`.`flows` ON CLUSTER `" + cluster + "` ADD COLUMN egressNodeName String, "
	wantAll(t, err, "table: `theia`.`flows` is a Distributed table over `theia`.`flows_local` on cluster `"+cluster+"`",
		"lack column(s) egressNodeName String, sourceEndpointKind String", "the local table first", "(1) "+local, "(2) "+dist)
	if strings.Index(err.Error(), local) > strings.Index(err.Error(), dist) {
		t.Errorf("the Distributed table comes before the local one: %v", err)
	}
	stmts := regexp.MustCompile(`\(\d\) (ALTER TABLE [^;]*);`).FindAllStringSubmatch(err.Error(), -1)
	if len(stmts) != 2 {
		t.Fatalf("statements in %v", err)
	}
	// The statements parse; ON CLUSTER needs ZooKeeper, which this server has not.
	for _, s := range stmts {
		var ex *clickhouse.Exception
		if err := conn.Exec(context.Background(), s[1]); !errors.As(err, &ex) || ex.Code == 62 {
			t.Errorf("%s: %v, want the server to accept its syntax", s[1], err)
		}
	}
	onCluster := " ON CLUSTER `" + cluster + "`"
	// The wrong order, as a user following the old message did: the
	// Distributed table only. flowtel sees the local table still lacks them.
	exec(t, conn, strings.Replace(stmts[1][1], onCluster, "", 1))
	err = startErr(t, cfg)
	wantAll(t, err, "(1) "+local)
	if strings.Contains(err.Error(), "ALTER TABLE `theia`.`flows` ") {
		t.Errorf("the Distributed table has every column, yet the error alters it: %v", err)
	}
	exec(t, conn, strings.Replace(stmts[0][1], onCluster, "", 1))

	exp, _ := startExporter(t, cfg)
	recs := []*flowrecord.Record{intraNodeRecord(), interNodePairedRecord(), interNodeUnpairedRecord(), toExternalRecord(), fromExternalRecord()}
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", recs...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "5 rows in flows_local", func() bool {
		return count(t, conn, "SELECT count() FROM theia.flows_local WHERE correlationState != ''") == 5
	})
	if n := count(t, conn, "SELECT count() FROM theia.flows WHERE egressNodeName = 'node-d'"); n != 1 {
		t.Errorf("%d rows with egressNodeName through the Distributed table, want 1", n)
	}
	// create_schema made no views over the Distributed table.
	if n := count(t, conn, "SELECT count() FROM system.tables WHERE database = 'theia' AND name LIKE '%view%'"); n != 0 {
		t.Errorf("%d view tables created over a Distributed table", n)
	}
}
