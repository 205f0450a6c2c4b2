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
}

// TestQueries runs every documented query against the table, checks its
// result, and checks that docs/clickhouse.md shows it verbatim.
func TestQueries(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	exp, _ := startExporter(t, testConfig(srv, "queries"))

	minute := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	var recs []*flowrecord.Record
	for i, mk := range []func() *flowrecord.Record{intraNodeRecord, interNodePairedRecord, interNodeUnpairedRecord, toExternalRecord, fromExternalRecord} {
		r := mk()
		r.End = minute.Add(time.Duration(10+i) * time.Second)
		r.Start = r.End.Add(-10 * time.Second)
		recs = append(recs, r)
	}
	if err := exp.ConsumeLogs(context.Background(), logsOf("c", recs...)); err != nil {
		t.Fatal(err)
	}
	conn := client(t, srv)
	waitFor(t, 20*time.Second, "5 rows", func() bool { return count(t, conn, "SELECT count() FROM queries.flows") == 5 })

	// Users run the queries with the flows table's database as default database.
	qconn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}, Auth: clickhouse.Auth{Database: "queries"}})
	if err != nil {
		t.Fatal(err)
	}
	defer qconn.Close()

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
			got := runQuery(t, qconn, string(sql))
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
