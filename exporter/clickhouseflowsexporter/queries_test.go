//go:build integration

package clickhouseflowsexporter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// queryResults are the expected results of each query in testdata/queries on
// the five test records, written one minute ago (see TestQueries).
var queryResults = map[string][]string{
	"top_talkers_by_pod.sql": {
		"shop checkout-1 9500", "shop web-7d9f-abcde 1900", "dns-clients client-1 960",
	},
	"top_talkers_by_namespace.sql": {
		" shop 1 91000", "shop  1 9500", " monitoring 1 6700", "shop shop 1 1900", "dns-clients kube-system 1 960",
	},
	// (1900+960+6700+9500+91000) bytes * 8 / 60 s
	"throughput_over_time.sql": {"MINUTE 14674.666666666666"},
	"node_to_pod.sql":          {"node-a monitoring exporter-x 9100 1 6700"},
	"unpaired_records.sql":     {"2 node-a node-b 1"},
	// Theia's views, filled by the same inserts. The Node → Pod record shows
	// as "/:41003" (Theia knows no Node endpoints); kube-system is left out.
	"theia_sankey_pod_to_pod.sql": {"/:41003 monitoring/exporter-x:9100 700", "shop/web-7d9f-abcde:41001 shop/api-0:8080 400"},
	// 320 and 400 bytes * 8 / 60 s; the throughput columns of the two aggregated records.
	"theia_pod_throughput.sql":    {"MINUTE dns-clients/client-1 42.666666666666664 134", "MINUTE shop/web-7d9f-abcde 53.333333333333336 320"},
	"theia_policy_allow_deny.sql": {"shop/allow-web allow 1900", "deny-bad deny 91000"},
	// node-a → node-b: the paired (320/640) and the unpaired (700/6000) record.
	"theia_node_to_node.sql": {"node-a node-b 1020 6640", "node-a node-a 400 1500"},
}

// TestQueries runs every documented query against the table, checks its
// result, and checks that docs/clickhouse.md shows it verbatim.
func TestQueries(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	exp, _ := startExporter(t, testConfig(srv, "queries"))

	minute := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", queryRecords(minute)...)); err != nil {
		t.Fatal(err)
	}
	checkQueries(t, srv.Addr(), "queries", minute)
}

// queryRecords are the five test records the queries run on, ending in minute.
func queryRecords(minute time.Time) []*flowrecord.Record {
	var recs []*flowrecord.Record
	for i, mk := range []func() *flowrecord.Record{intraNodeRecord, interNodePairedRecord, interNodeUnpairedRecord, toExternalRecord, fromExternalRecord} {
		r := mk()
		r.End = minute.Add(time.Duration(10+i) * time.Second)
		r.Start = r.End.Add(-10 * time.Second)
		recs = append(recs, r)
	}
	return recs
}

// checkQueries waits for the queryRecords in database's flows table and
// views at addr, then runs every query file there and checks its result,
// and that docs/clickhouse.md shows it verbatim.
func checkQueries(t *testing.T, addr, database string, minute time.Time) {
	t.Helper()
	// Users run the queries with the flows table's database as default database.
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Auth: clickhouse.Auth{Database: database}, ReadTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, 20*time.Second, "5 rows", func() bool { return count(t, conn, "SELECT count() FROM flows") == 5 })
	// The server writes the views after the table, within the same INSERT.
	for _, v := range flowtable.Views {
		q := "SELECT sum(octetDeltaCount) FROM " + v.Name
		waitFor(t, 20*time.Second, q, func() bool { return count(t, conn, q) == 400+320+700+500+1000 })
	}

	readme, err := os.ReadFile("../../docs/clickhouse.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "queries", "*.sql"))
	if err != nil || len(files) != len(queryResults) {
		t.Fatalf("%d query files (%v), want %d", len(files), err, len(queryResults))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			sql, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(readme), strings.TrimSpace(string(sql))) {
				t.Errorf("docs/clickhouse.md does not show %s verbatim", f)
			}
			got := runQuery(t, conn, string(sql))
			want := make([]string, len(queryResults[name]))
			for i, w := range queryResults[name] {
				want[i] = strings.ReplaceAll(w, "MINUTE", minute.Format(time.RFC3339))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("result:\n%q\nwant:\n%q", got, want)
			}
		})
	}
}

// runQuery returns each result row as its values joined by spaces.
func runQuery(t *testing.T, conn clickhouse.Conn, sql string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	types := rows.ColumnTypes()
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		vals := make([]string, len(ptrs))
		for i, p := range ptrs {
			v := reflect.ValueOf(p).Elem().Interface()
			if tm, ok := v.(time.Time); ok {
				v = tm.UTC().Format(time.RFC3339)
			}
			vals[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(vals, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
