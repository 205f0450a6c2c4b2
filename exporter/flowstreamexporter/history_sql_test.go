package flowstreamexporter

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

func TestHistorySQLPushesTheScopeAndFiltersDown(t *testing.T) {
	q, err := parseRequest(&pb.GetFlowsRequest{Namespaces: []string{"ns-'a"}, Since: timestamppb.New(t0),
		Filters: []*pb.FlowFilter{
			{FlowTypes: []pb.FlowType{pb.FlowType_FLOW_TYPE_TO_EXTERNAL}, ServiceNames: []string{"web"}},
			{Namespaces: []string{"ns-b"}, PodNames: []string{"api"}, Direction: pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO},
			{Namespaces: []string{""}, Ips: []string{"10.0.0.0/8"}}, // nothing SQL can decide
		}})
	require.NoError(t, err)
	where := historyWhere(q, q.since.Unix())
	sql := chunkRowsSQL("flowtel", "flows", where, chunk{start: t0.Unix(), end: t0.Unix() + 60, insertedFrom: t0.Unix() + 1, insertedTo: t0.Unix() + 90}, 1001)
	for _, want := range []string{
		"FROM `flowtel`.`flows` WHERE ",
		"flowEndSeconds >= toDateTime(" + itoa(t0.Unix()) + ")",
		"timeInserted >= toDateTime(" + itoa(t0.Add(-insertSkew).Unix()) + ")",
		`(sourcePodNamespace = 'ns-\'a' OR destinationPodNamespace = 'ns-\'a')`,
		"flowType IN (3)",
		"splitByChar(':', splitByChar('/', destinationServicePortName)[2])[1] IN ('web')",
		"(destinationPodNamespace IN ('ns-b') AND destinationPodName IN ('api'))",
	} {
		assert.Contains(t, sql, want)
	}
	assert.NotContains(t, sql, "IN ('')", "a Namespace list with \"\" is decided in Go: a redacted peer has none")
	assert.Contains(t, sql, "timeInserted >= toDateTime("+itoa(t0.Unix()+1)+") AND timeInserted <= toDateTime("+itoa(t0.Unix()+90)+")", "the chunk is read by the primary key")
	assert.Contains(t, sql, "flowEndSeconds < toDateTime("+itoa(t0.Unix()+60)+")")
	assert.True(t, strings.HasSuffix(sql, " ORDER BY flowEndSeconds LIMIT 1001"), sql)
	plan := chunkPlanSQL("flowtel", "flows", where, 101)
	assert.Contains(t, plan, strings.Join(where, " AND "), "the plan has the same conditions")
	assert.True(t, strings.HasSuffix(plan, " GROUP BY e ORDER BY e LIMIT 101"), plan)
}

func TestHistoryColumnsReadEveryStoredField(t *testing.T) {
	names := map[string]bool{}
	for _, c := range historyColumns {
		require.False(t, names[c.name], "column %s read twice", c.name)
		names[c.name] = true
	}
	for _, n := range []string{endColumn, "flowStartSeconds", "sourceIP", "sourcePodLabels", "destinationServicePortName",
		"ingressNetworkPolicyRuleAction", "sourceEndpointKind", "egressIP", "throughput", "octetTotalCount"} {
		assert.True(t, names[n], "%s is not read back", n)
	}
	assert.False(t, names["destinationServiceIP"], "the second copy of the Service address is not read")
	assert.False(t, names["clusterUUID"], "no field of the record")
}

func TestSeamFingerprintsIgnoreWhatTheTableDoesNotKeep(t *testing.T) {
	a, b := podRecord("ns-a", "web", "ns-b", "api"), podRecord("ns-a", "web", "ns-b", "api")
	b.End = b.End.Add(300 * time.Millisecond) // the table keeps whole seconds
	b.Key, b.Reporter.NodeName = "other", "node-z"
	assert.Equal(t, fingerprint(a), fingerprint(b))
	b.Stats.OctetDelta++
	assert.NotEqual(t, fingerprint(a), fingerprint(b))
	fps := fingerprints{}
	fps.add(fingerprint(a))
	fps.add(fingerprint(a))
	assert.True(t, fps.take(fingerprint(a)))
	assert.True(t, fps.take(fingerprint(a)))
	assert.False(t, fps.take(fingerprint(a)), "a multiset: taken as often as added")
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
