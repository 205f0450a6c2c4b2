//go:build integration

package flowstreamexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestTopTalkers: GetTopTalkers sums the history in ClickHouse per pair,
// with the flow stream's scope and disclosure, against a real
// kube-apiserver's RBAC.
func TestTopTalkers(t *testing.T) {
	store := startFlowStore(t)
	c := startCluster(t, withHistory(store, 1000))
	recs := map[string]*flowrecord.Record{
		"ab1": podRecord("ns-a", "web", "ns-b", "api"), "ab2": podRecord("ns-a", "web", "ns-b", "api"),
		"ab3": podRecord("ns-a", "web", "ns-b", "api"), "aa": podRecord("ns-a", "web", "ns-a", "cache"),
		"bc": podRecord("ns-b", "api", "ns-c", "db"), "denied": podRecord("ns-a", "scanner", "ns-b", "api"),
	}
	recs["denied"].IngressPolicy.RuleAction = flowrecord.RuleActionDrop
	order := []string{"ab1", "ab2", "ab3", "aa", "bc", "denied"}
	named(recs, order, t0) // distinct source ports: distinct connections
	all := make([]*flowrecord.Record, 0, len(order))
	for _, n := range order {
		all = append(all, recs[n])
	}
	store.write(t, all...)
	since := timestamppb.New(t0.Add(-time.Hour))
	top := func(tok credential, req *pb.GetTopTalkersRequest) (*pb.GetTopTalkersResponse, error) {
		req.Since = since
		ctx, cancel := context.WithTimeout(withToken(context.Background(), tok), 20*time.Second)
		defer cancel()
		return pb.NewFlowTopServiceClient(c.conn(t, tok)).GetTopTalkers(ctx, req)
	}
	type pair struct {
		src, dst           string
		bytes, connections uint64
	}
	pairs := func(resp *pb.GetTopTalkersResponse) []pair {
		var out []pair
		for _, tt := range resp.Talkers {
			out = append(out, pair{tt.SourceNamespace + "/" + tt.SourceName, tt.DestinationNamespace + "/" + tt.DestinationName, tt.Bytes, tt.Connections})
		}
		return out
	}

	a := tokenCred(c.serviceAccount(t, "team", "top-a", map[string][]string{flowViewer: {"ns-a"}}))
	resp, err := top(a, &pb.GetTopTalkersRequest{Namespaces: []string{"ns-a"}})
	require.NoError(t, err)
	require.Equal(t, []pair{
		{"ns-a/Deployment/web", "ns-b/", 1200, 3}, // the peer's workload withheld
		{"ns-a/Deployment/scanner", "/", 400, 1},  // denied: its Namespace too
		{"ns-a/Deployment/web", "ns-a/StatefulSet/cache", 400, 1},
	}, pairs(resp), "ns-a's pairs only, the largest first")
	assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, resp.Talkers[0].DestinationDisclosure)
	assert.Equal(t, uint64(3), resp.Groups, "ClickHouse summed only ns-a's rows, in 3 groups")

	resp, err = top(a, &pb.GetTopTalkersRequest{Namespaces: []string{"ns-a"}, GroupBy: pb.TopGroupBy_TOP_GROUP_BY_NAMESPACE, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []pair{{"ns-a/", "ns-b/", 1200, 3}}, pairs(resp), "by Namespace, the first")

	all6 := tokenCred(c.serviceAccount(t, "ops", "top-all", map[string][]string{flowViewer: {""}}))
	resp, err = top(all6, &pb.GetTopTalkersRequest{ClusterWide: true, GroupBy: pb.TopGroupBy_TOP_GROUP_BY_SERVICE, OrderBy: pb.TopOrderBy_TOP_ORDER_BY_CONNECTIONS})
	require.NoError(t, err)
	require.Equal(t, pair{"ns-a/Deployment/web", "ns-b/ns-b/api-svc:http", 1200, 3}, pairs(resp)[0], "cluster-wide: every name, to the Service")
	require.Len(t, resp.Talkers, 4)

	_, err = top(tokenCred(c.serviceAccount(t, "team", "top-nobody", nil)), &pb.GetTopTalkersRequest{Namespaces: []string{"ns-a"}})
	requireCode(t, err, codes.PermissionDenied, "may not list flows")
	_, err = top(a, &pb.GetTopTalkersRequest{Namespaces: []string{"ns-a"}, Limit: 5000})
	requireCode(t, err, codes.InvalidArgument, "limit: at most 1000 (got 5000)")
}
