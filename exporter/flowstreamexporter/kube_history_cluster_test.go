//go:build integration

package flowstreamexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/deploy/dashboards/demodata"
	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// TestHistoryCluster: history from the clustered schema (2 shards x 2
// replicas, written by the clickhouse_flows exporter through its
// Distributed table), read through the Distributed table of a server of the
// other shard: a namespaced viewer gets exactly its rows from both shards,
// redacted; a bounded query goes on without a duplicate.
func TestHistoryCluster(t *testing.T) {
	const name = "flows_cluster"
	cl := chserver.StartCluster(t, chserver.ClusterOptions{Name: name, Shards: 2, Replicas: 2})
	recs := testRecords()
	order := []string{"ab", "bc", "ext", "node", "hosts", "denied"}
	names := named(recs, order, t0)
	all := make([]*flowrecord.Record, 0, len(order))
	for _, n := range order {
		all = append(all, recs[n])
	}
	demodata.WriteWith(t, cl.Servers[0][0], historyDB, all, func(c *clickhouseflowsexporter.Config) {
		c.Cluster, c.TheiaViews = name, false
	})
	reader := &flowStore{srv: cl.Servers[1][0]}
	c := startCluster(t, withHistory(reader, 1000))
	since := timestamppb.New(t0.Add(-time.Hour))

	tok := tokenCred(c.serviceAccount(t, "team", "hc-a-viewer", map[string][]string{flowViewer: {"ns-a"}}))
	resps, err := c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since})
	require.NoError(t, err)
	flows, st := historyFlows(resps)
	require.Equal(t, []string{"ab", "ext", "denied"}, portNames(names, flows), "ns-a's rows of both shards, oldest first")
	assert.Equal(t, uint64(3), st.Rows)
	k := byPort(names, flows)["ab"].K8S
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.DestinationDisclosure)
	assert.Empty(t, k.DestinationPodName+k.DestinationNodeName)

	all6 := tokenCred(c.serviceAccount(t, "ops", "hc-all", map[string][]string{flowViewer: {""}}))
	resps, err = c.responses(t, all6, &pb.GetFlowsRequest{ClusterWide: true, Since: since})
	require.NoError(t, err)
	flows, _ = historyFlows(resps)
	require.Equal(t, order, portNames(names, flows), "every row of both shards, once")

	c.startExporter(t, false, withHistory(reader, 2))
	var got []string
	req := &pb.GetFlowsRequest{ClusterWide: true, Since: since}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the bounded history never ended")
		resps, err := c.responses(t, all6, req)
		require.NoError(t, err)
		flows, st := historyFlows(resps)
		got = append(got, portNames(names, flows)...)
		if !st.Truncated {
			break
		}
		req.Since = st.ContinueSince
	}
	require.Equal(t, order, got, "page after page, every row once")
}
