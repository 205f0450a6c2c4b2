//go:build integration

package flowstreamexporter

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

// TestHistoryAuthorization: a stream whose since is older than the ring is
// served from ClickHouse (written by the clickhouse_flows exporter) with the
// live stream's authorization, scope, tiers and redaction, against a real
// kube-apiserver's RBAC.
func TestHistoryAuthorization(t *testing.T) {
	store := startFlowStore(t)
	c := startCluster(t, withHistory(store, 1000))
	recs := testRecords()
	order := []string{"ab", "bc", "ext", "node", "hosts", "denied"}
	names := named(recs, order, t0)
	for _, n := range order {
		store.write(t, recs[n]) // in ClickHouse only: the ring is empty
	}
	since := timestamppb.New(t0.Add(-time.Hour))

	t.Run("viewer in ns-a sees exactly its redacted rows", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "h-a-viewer", map[string][]string{flowViewer: {"ns-a"}}))
		resps, err := c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since})
		require.NoError(t, err)
		flows, st := historyFlows(resps)
		require.Equal(t, []string{"ab", "ext", "denied"}, portNames(names, flows), "either endpoint in ns-a, oldest end first")
		require.NotNil(t, st, "the history part says how it ended")
		assert.Equal(t, uint64(3), st.Rows, "the Namespace scope is pushed down: ClickHouse returns only ns-a's rows")
		assert.False(t, st.Truncated)
		f := byPort(names, flows)
		k := f["ab"].K8S
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_UNSPECIFIED, k.SourceDisclosure)
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_FLOW, k.DestinationDisclosure)
		assert.Equal(t, "web", k.SourcePodName)
		assert.Equal(t, map[string]string{"app": "web"}, k.SourcePodLabels.GetLabels(), "labels read back from the table's JSON")
		assert.Equal(t, "node-a", k.SourceNodeName)
		assert.Equal(t, "ns-b", k.DestinationPodNamespace)
		assert.Empty(t, k.DestinationPodName+k.DestinationServicePortName+k.DestinationNodeName+k.DestinationPodUid)
		assert.Nil(t, k.DestinationPodLabels)
		assert.Empty(t, k.IngressNetworkPolicyName, "the peer's policy is withheld")
		assert.Equal(t, pb.NetworkPolicyRuleAction_NETWORK_POLICY_RULE_ACTION_ALLOW, k.IngressNetworkPolicyRuleAction)
		assert.Nil(t, f["ab"].Ipfix)
		assert.Equal(t, uint64(3400), f["ab"].Stats.GetOctetTotalCount())
		assert.Equal(t, t0.Unix(), f["ab"].EndTs.AsTime().Unix())
		assert.Empty(t, f["denied"].K8S.DestinationPodNamespace, "denied: the unidentified peer's Namespace is withheld")
		assert.Equal(t, pb.FlowType_FLOW_TYPE_TO_EXTERNAL, f["ext"].K8S.FlowType)

		// The request's filters apply to history as to live records.
		resps, err = c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since,
			Filters: []*pb.FlowFilter{{FlowTypes: []pb.FlowType{pb.FlowType_FLOW_TYPE_TO_EXTERNAL}}}})
		require.NoError(t, err)
		flows, st = historyFlows(resps)
		require.Equal(t, []string{"ext"}, portNames(names, flows))
		assert.Equal(t, uint64(1), st.Rows, "the flow type filter is pushed down")
		// A filter on what redaction withholds matches nothing.
		resps, err = c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since,
			Filters: []*pb.FlowFilter{{PodNames: []string{"api"}, Direction: pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO}}})
		require.NoError(t, err)
		flows, _ = historyFlows(resps)
		assert.Empty(t, flows, "the peer's Pod name is withheld, so a filter on it does not reveal it")
	})

	t.Run("identity-viewer in the peer's Namespace", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "h-a-id-b", map[string][]string{flowViewer: {"ns-a"}, identityViewer: {"ns-b"}}))
		resps, err := c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since})
		require.NoError(t, err)
		flows, _ := historyFlows(resps)
		k := byPort(names, flows)["ab"].K8S
		assert.Equal(t, pb.EndpointDisclosure_ENDPOINT_DISCLOSURE_IDENTITY, k.DestinationDisclosure)
		assert.Equal(t, "api", k.DestinationPodName)
		assert.Equal(t, "ns-b/api-svc:http", k.DestinationServicePortName)
		assert.Empty(t, k.DestinationNodeName, "the peer's Node is never named")
	})

	t.Run("cluster-wide viewer sees every row in full", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "ops", "h-all", map[string][]string{flowViewer: {""}}))
		resps, err := c.responses(t, tok, &pb.GetFlowsRequest{ClusterWide: true, Since: since})
		require.NoError(t, err)
		flows, st := historyFlows(resps)
		require.Equal(t, order, portNames(names, flows))
		assert.Equal(t, uint64(6), st.Rows)
		for _, f := range flows {
			assert.Zero(t, f.K8S.SourceDisclosure)
			assert.Zero(t, f.K8S.DestinationDisclosure)
		}
		assert.Equal(t, "node-c", byPort(names, flows)["node"].K8S.SourceNodeName)
		assert.Equal(t, "node-b", byPort(names, flows)["ab"].K8S.DestinationNodeName)

		resps, err = c.responses(t, tok, &pb.GetFlowsRequest{ClusterWide: true, Since: since, MaxCount: 2, Follow: true})
		require.NoError(t, err, "max_count ends a following stream within its history")
		flows, _ = historyFlows(resps)
		require.Equal(t, []string{"ab", "bc"}, portNames(names, flows))
	})

	t.Run("an Antrea client reads the history", func(t *testing.T) {
		schema := loadAntreaSchema(t)
		tok := tokenCred(c.serviceAccount(t, "ops", "h-antrea", map[string][]string{flowViewer: {""}}))
		ctx, cancel := context.WithTimeout(withToken(context.Background(), tok), 20*time.Second)
		defer cancel()
		s, err := pb.NewFlowStreamServiceClient(c.conn(t, tok)).GetFlows(ctx, &pb.GetFlowsRequest{ClusterWide: true, Since: since,
			Filters: []*pb.FlowFilter{
				{Namespaces: []string{"ns-a"}, Direction: pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_FROM},
				{PodNames: []string{"api"}, Direction: pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO},
			}})
		require.NoError(t, err)
		var msgs []*dynamicpb.Message
		for {
			resp, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			msgs = append(msgs, schema.decode(t, resp))
		}
		// ab and denied; HistoryStatus (1002) is not read as any of Antrea's fields.
		checkAntreaReads(t, schema, msgs, nil, true, 2)
	})

	t.Run("a user without a grant is refused", func(t *testing.T) {
		tok := tokenCred(c.serviceAccount(t, "team", "h-nobody", nil))
		_, err := c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since})
		requireCode(t, err, codes.PermissionDenied, "may not list flows")
		tok = tokenCred(c.serviceAccount(t, "team", "h-b-only", map[string][]string{flowViewer: {"ns-b"}}))
		_, err = c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since})
		requireCode(t, err, codes.PermissionDenied, "in Namespace ns-a")
	})

	t.Run("a bounded query says so and where to go on", func(t *testing.T) {
		c.startExporter(t, false, withHistory(store, 2)) // a second gateway (another ServiceAccount), its row limit 2
		tok := tokenCred(c.serviceAccount(t, "team", "h-bounded", map[string][]string{flowViewer: {"ns-a"}}))
		resps, err := c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: since, Follow: true})
		require.NoError(t, err, "a truncated history ends the stream, follow or not")
		flows, st := historyFlows(resps)
		require.NotNil(t, st)
		assert.True(t, st.Truncated)
		assert.Equal(t, uint64(2), st.MaxRows)
		// Rows ab (end t0) and ext (t0+2s) were read; ext's second may
		// hold more, so it is left for the next request.
		require.Equal(t, []string{"ab"}, portNames(names, flows))
		require.Equal(t, t0.Add(2*time.Second), st.ContinueSince.AsTime())
		resps, err = c.responses(t, tok, &pb.GetFlowsRequest{Namespaces: []string{"ns-a"}, Since: st.ContinueSince})
		require.NoError(t, err)
		flows, st = historyFlows(resps)
		assert.False(t, st.Truncated)
		require.Equal(t, []string{"ext", "denied"}, portNames(names, flows), "the rest, none twice")
	})
}
