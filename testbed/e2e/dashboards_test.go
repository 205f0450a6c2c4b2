//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/deploy/dashboards"
)

// emptyOnTheScenario are the ClickHouse panels the scenario gives nothing to
// show: it has no Pod → Node connection and no NetworkPolicy, and may pair
// every inter-Node connection.
var emptyOnTheScenario = map[string]bool{
	"flowtel-flows/Pod → Node":                          true,
	"flowtel-connections/Denied by NetworkPolicy":       true,
	"flowtel-connections/Unpaired records by Node pair": true,
	"flowtel-connections/Unpaired connections":          true,
}

// checkDashboards runs every ClickHouse panel of deploy/dashboards, expanded
// as Grafana and its ClickHouse plugin do, on the flows the whole pipeline
// wrote: each runs, each panel the scenario feeds returns rows, and the
// refused connections (the IPv4 and IPv6 cases) and the Node → Pod flows of
// Antrea #8260 are there.
func (b *bed) checkDashboards(t *testing.T) {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	now := time.Now()
	g := dashboards.Expander{From: now.Add(-time.Hour), To: now.Add(time.Minute), Interval: 10 * time.Second,
		Vars: map[string]string{"table": "flowtel_e2e.flows"}}
	queries, err := dashboards.ClickHouseQueries()
	require.NoError(t, err)
	results := map[string][]dashboards.Row{}
	for _, q := range queries {
		key := q.Dashboard + "/" + q.Panel + " " + q.PanelType
		sql, err := g.Expand(q.SQL)
		require.NoError(t, err, key)
		_, rows, err := dashboards.Run(context.Background(), conn, sql)
		if !assert.NoError(t, err, key) {
			continue
		}
		if !emptyOnTheScenario[q.Dashboard+"/"+q.Panel] {
			assert.NotEmpty(t, rows, "%s: no rows on the scenario's flows", key)
		}
		results[key] = rows
	}
	refused := results["flowtel-connections/Refused connections stat"]
	if assert.Len(t, refused, 1) {
		assert.Equal(t, "2", fmt.Sprint(refused[0]["refused"]), "the refused cases, IPv4 and IPv6")
	}
	var nodeToWebA bool
	for _, r := range results["flowtel-flows/Node → Pod table"] {
		nodeToWebA = nodeToWebA || (r["node"] == "node-1" && r["pod"] == "default/web-a")
	}
	assert.True(t, nodeToWebA, "Node → Pod shows node-1 → default/web-a: %v", results["flowtel-flows/Node → Pod table"])
}
