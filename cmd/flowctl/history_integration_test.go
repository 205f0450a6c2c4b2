//go:build integration

package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/deploy/dashboards/demodata"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// TestObserveHistory: flowctl observe --since 7d and map --since 7d read a
// week of flows through the flow stream, from the gateway's ClickHouse
// (written by the clickhouse_flows exporter), with a namespaced user's
// credentials and no database credentials; the gateway's row limit (2)
// bounds each history query, and flowctl asks for the rest until it has
// every flow, each once, oldest first.
func TestObserveHistory(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	e := startEnvWith(t, map[string]any{"history": map[string]any{"endpoint": srv.Endpoint(), "database": "hist", "max_rows": 2}})
	start := time.Now().Add(-6 * 24 * time.Hour).Truncate(time.Second)
	var recs []*flowrecord.Record
	for i := range 5 {
		r := record("", "ns-a", "web", "ns-b", "api", start.Add(time.Duration(i)*time.Hour))
		r.Source.Port = uint16(30000 + i)
		recs = append(recs, r)
	}
	recs = append(recs, record("", "ns-b", "api", "ns-c", "db", start)) // another Namespace's
	demodata.Write(t, srv, "hist", recs)
	kc := e.user(t, "historian", "ns-a")
	base := []string{"--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca, "-n", "ns-a"}
	ctx := context.Background()

	out, errOut, code := flowctl(ctx, append([]string{"observe", "-o", "jsonl", "--since", "7d"}, base...)...)
	require.Zero(t, code, errOut)
	flows := decodeLines(t, out)
	var ports []uint32
	for _, f := range flows {
		ports = append(ports, f.Transport.GetSourcePort())
		assert.Empty(t, f.K8S.DestinationPodName, "the peer is redacted, as live")
	}
	require.Equal(t, []uint32{30000, 30001, 30002, 30003, 30004}, ports, "every flow of ns-a once, oldest first")
	assert.Contains(t, errOut, "flowctl: the gateway bounded the history at 2 rows: asking for the rest from")

	// Two days back: the flows of the last two days only.
	out, errOut, code = flowctl(ctx, append([]string{"observe", "-o", "jsonl", "--since", "5d20h30m"}, base...)...)
	require.Zero(t, code, errOut)
	assert.Len(t, decodeLines(t, out), 1, "only the flow ending within the window")

	out, errOut, code = flowctl(ctx, append([]string{"map", "--since", "7d"}, base...)...)
	require.Zero(t, code, errOut)
	g := parseDOT(t, out)
	var edges []string
	for k, a := range g.edges {
		edges = append(edges, k+" x"+a["connections"])
	}
	slices.Sort(edges)
	require.Len(t, edges, 1, "%v", edges)
	assert.Contains(t, edges[0], " x5", "five connections from the history, on one edge")

	// flowctl top: summed by the gateway in ClickHouse, disclosed as the stream.
	out, errOut, code = flowctl(ctx, append([]string{"top", "--since", "7d", "--sort", "connections"}, base...)...)
	require.Zero(t, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "a header and ns-a's one pair: %s", out)
	assert.Regexp(t, `^ns-a/Pod/web\s+ns-b/\? \[redacted\]\s+0\s+0\s+5$`, lines[1])
	_, errOut, code = flowctl(ctx, append([]string{"top", "--by", "pods"}, base...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `--by: "pods" is not workload, service or namespace`)
}
