//go:build integration

package dashboards_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/deploy/dashboards"
	"github.com/flowtel/flowtel/deploy/dashboards/demodata"
	"github.com/flowtel/flowtel/testbed/chserver"
)

type row = dashboards.Row

// panelWant is what a panel's query must return on demodata.Records: its
// columns in order, and a check of values the set determines.
type panelWant struct {
	columns []string
	check   func(t *testing.T, rows []row)
}

// str renders a value for comparison.
func str(v any) string { return fmt.Sprint(v) }

// first checks the first row's values.
func first(want map[string]any) func(*testing.T, []row) {
	return func(t *testing.T, rows []row) {
		for k, v := range want {
			assert.Equal(t, str(v), str(rows[0][k]), "first row, column %s (rows %v)", k, rows)
		}
	}
}

// rows checks the number of rows, then the first row.
func rowsThen(n int, want map[string]any) func(*testing.T, []row) {
	return func(t *testing.T, rows []row) {
		assert.Len(t, rows, n, "%v", rows)
		first(want)(t, rows)
	}
}

// series checks a time series: the set of values of the label column, and
// the sum of the value column per label (scaled: bits/s over a 60 s interval
// back to bytes).
func series(label, value string, scale float64, want map[string]float64) func(*testing.T, []row) {
	return func(t *testing.T, rows []row) {
		got := map[string]float64{}
		for _, r := range rows {
			_, ok := r["time"].(time.Time)
			assert.True(t, ok, "time column is %T, want a DateTime", r["time"])
			got[str(r[label])] += reflect.ValueOf(r[value]).Convert(reflect.TypeOf(0.0)).Float() * scale
		}
		require.Len(t, got, len(want), "%v", got)
		for k, v := range want {
			assert.InDelta(t, v, got[k], 0.01, "%s %s", label, k)
		}
	}
}

const bits = 60.0 / 8 // bits/s over the test's 60 s interval → bytes

// The known facts of demodata.Records (see its doc): 10 connections, 36360
// bytes (7 × 5000, web-b → node-2 1200, the refused 100, the denied 60). By
// endpoint, client-a → web-c (the unpaired and the denied) is the top pair; by
// workload, client → web-b (a Service connection and the refused one).
var panelWants = map[string]panelWant{
	"flowtel-flows/Bytes":          {[]string{"bytes"}, first(map[string]any{"bytes": 36360})},
	"flowtel-flows/Connections":    {[]string{"connections"}, first(map[string]any{"connections": 10})},
	"flowtel-flows/Node endpoints": {[]string{"connections"}, first(map[string]any{"connections": 3})},
	"flowtel-flows/Records":        {[]string{"records"}, first(map[string]any{"records": 10})},
	"flowtel-flows/Throughput by flow type": {[]string{"time", "flow_type", "bits_per_second"},
		series("flow_type", "bits_per_second", bits, map[string]float64{"intra-node": 11200, "inter-node": 15160, "to-external": 5000, "from-external": 5000})},
	"flowtel-flows/Top talkers": {[]string{"source", "destination", "service", "connections", "bytes"},
		rowsThen(9, map[string]any{"source": "default/client-a", "destination": "default/web-c", "service": "", "connections": 2, "bytes": 5060})},
	"flowtel-flows/Workloads": {[]string{"source_kind", "source", "destination_kind", "destination", "connections", "bytes"},
		rowsThen(8, map[string]any{"source_kind": "Deployment", "source": "default/client", "destination_kind": "", "destination": "default/web-b", "connections": 2, "bytes": 5100})},
	"flowtel-flows/Namespace pairs": {[]string{"source_namespace", "destination_namespace", "connections", "bytes"},
		rowsThen(3, map[string]any{"source_namespace": "default", "destination_namespace": "default", "connections": 5, "bytes": 15160})},
	"flowtel-flows/Services": {[]string{"service", "connections", "bytes"},
		rowsThen(1, map[string]any{"service": "default/web-remote:http", "connections": 2, "bytes": 10000})},
	"flowtel-flows/Node → Pod": {[]string{"node", "pod", "port", "connections", "bytes"},
		rowsThen(2, map[string]any{"node": "node-1", "pod": "default/web-a", "port": 8080, "connections": 1, "bytes": 5000})},
	"flowtel-flows/Pod → Node": {[]string{"pod", "node", "port", "connections", "bytes"},
		rowsThen(1, map[string]any{"pod": "default/web-b", "node": "node-2", "port": 10250, "connections": 1, "bytes": 1200})},
	"flowtel-flows/Node endpoint throughput": {[]string{"time", "node", "bits_per_second"},
		series("node", "bits_per_second", bits, map[string]float64{"node-1": 10000, "node-2": 1200})},
	"flowtel-flows/To external": {[]string{"source", "address", "port", "egress_ip", "connections", "bytes"},
		rowsThen(1, map[string]any{"source": "default/client", "address": "192.0.2.80", "port": 8080, "egress_ip": "", "bytes": 5000})},
	"flowtel-flows/From external": {[]string{"address", "destination", "service", "connections", "bytes"},
		rowsThen(1, map[string]any{"address": "198.51.100.7", "destination": "default/web-b", "service": "default/web-remote:http", "bytes": 5000})},

	"flowtel-connections/Unpaired share": {[]string{"unpaired_percent"}, first(map[string]any{"unpaired_percent": 20})},
	"flowtel-connections/Records by correlation state": {[]string{"time", "state", "records"},
		series("state", "records", 1, map[string]float64{"not_required": 5, "paired": 4, "unpaired": 1})},
	"flowtel-connections/Unpaired records by Node pair": {[]string{"flow_type", "source_node", "destination_node", "records"},
		rowsThen(1, map[string]any{"flow_type": "inter-node", "source_node": "node-1", "destination_node": "node-3", "records": 1})},
	"flowtel-connections/Unpaired connections": {[]string{"last_seen", "source", "source_node", "destination", "destination_node", "port", "records"},
		rowsThen(1, map[string]any{"source": "default/client-a", "source_node": "node-1", "destination": "default/web-c", "destination_node": "node-3", "port": 8080})},
	"flowtel-connections/Refused connections": {[]string{"refused"}, first(map[string]any{"refused": 1})},
	"flowtel-connections/Refused connections over time": {[]string{"time", "destination", "refused"},
		series("destination", "refused", 1, map[string]float64{"default/web-b": 1})},
	"flowtel-connections/Refused connections (table)": {[]string{"source", "destination", "port", "service", "connections", "last_seen"},
		rowsThen(1, map[string]any{"source": "default/client-a", "destination": "default/web-b", "port": 9, "connections": 1})},
	"flowtel-connections/Denied by NetworkPolicy": {[]string{"source", "destination", "port", "policy", "connections"},
		rowsThen(1, map[string]any{"source": "default/client-a", "destination": "default/web-c", "port": 9000, "policy": "ingress default/deny-client"})},
	"flowtel-connections/End reasons": {[]string{"end_reason", "records"},
		rowsThen(2, map[string]any{"end_reason": "end_of_flow", "records": 9})},
	"flowtel-connections/TCP states": {[]string{"tcp_state", "connections"},
		rowsThen(3, map[string]any{"tcp_state": "TIME_WAIT", "connections": 8})},
}

// TestClickHousePanels runs every ClickHouse panel's query, with Grafana's
// variables and the plugin's macros expanded, against a real ClickHouse whose
// flows table the clickhouse_flows exporter filled with demodata.Records.
func TestClickHousePanels(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	now := time.Now().UTC().Truncate(time.Second)
	demodata.Write(t, srv, "dash", demodata.Records(now))
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
	require.NoError(t, err)
	defer conn.Close()

	g := dashboards.Expander{From: now.Add(-time.Hour), To: now.Add(time.Minute), Interval: time.Minute,
		Vars: map[string]string{"table": "dash.flows"}}
	queries, err := dashboards.ClickHouseQueries()
	require.NoError(t, err)
	ran := map[string]bool{}
	for _, q := range queries {
		key := q.Dashboard + "/" + q.Panel
		if q.PanelType == "table" && ran[key] {
			key += " (table)" // a stat and a table of the same name
		}
		require.False(t, ran[key], "%s: two panels of that name", key)
		ran[key] = true
		t.Run(key, func(t *testing.T) {
			want, ok := panelWants[key]
			require.True(t, ok, "no expectation for panel %q: add one to panelWants", key)
			sql, err := g.Expand(q.SQL)
			require.NoError(t, err)
			cols, rows, err := dashboards.Run(context.Background(), conn, sql)
			require.NoError(t, err)
			assert.Equal(t, want.columns, cols)
			require.NotEmpty(t, rows, "%s returned no rows", sql)
			want.check(t, rows)
		})
	}
	for key := range panelWants {
		assert.True(t, ran[key], "expectation %q matches no panel", key)
	}
}
