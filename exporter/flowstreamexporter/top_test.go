package flowstreamexporter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

func TestTopRequestValidation(t *testing.T) {
	for _, tt := range []struct {
		req  *pb.GetTopTalkersRequest
		want string
	}{
		{&pb.GetTopTalkersRequest{Namespaces: []string{"a"}}, "since: is required"},
		{&pb.GetTopTalkersRequest{Since: timestamppb.New(t0)}, "namespaces: one Namespace is required"},
		{&pb.GetTopTalkersRequest{Namespaces: []string{"a"}, Since: timestamppb.New(t0), Until: timestamppb.New(t0)}, "until: must be after since"},
		{&pb.GetTopTalkersRequest{Namespaces: []string{"a"}, Since: timestamppb.New(t0), GroupBy: 9}, "group_by: unknown value (got 9)"},
		{&pb.GetTopTalkersRequest{Namespaces: []string{"a"}, Since: timestamppb.New(t0), OrderBy: 9}, "order_by: unknown value (got 9)"},
	} {
		_, _, _, err := parseTopRequest(tt.req)
		require.ErrorContains(t, err, tt.want)
	}
	q, g, limit, err := parseTopRequest(&pb.GetTopTalkersRequest{Namespaces: []string{"a"}, Since: timestamppb.New(t0), GroupBy: pb.TopGroupBy_TOP_GROUP_BY_SERVICE})
	require.NoError(t, err)
	assert.Equal(t, pb.TopGroupBy_TOP_GROUP_BY_SERVICE, g)
	assert.Equal(t, defaultTopLimit, limit)
	sql := topSQL("flowtel", "flows", q, g, pb.TopOrderBy_TOP_ORDER_BY_CONNECTIONS, 11)
	assert.Contains(t, sql, "(sourcePodNamespace = 'a' OR destinationPodNamespace = 'a')", "the scope is pushed down")
	assert.Contains(t, sql, "destinationServicePortName != ''")
	assert.True(t, strings.HasSuffix(sql, "ORDER BY connections DESC LIMIT 11"), sql)
}

func TestDiscloseTalkers(t *testing.T) {
	v := &viewer{scope: scope{namespace: "a"}} // no access: every endpoint in full
	k := talkerKey{srcNS: "a", srcName: "Deployment/web", dstNS: "b", dstName: "StatefulSet/api", denied: true}
	assert.Equal(t, talkerKey{srcNS: "a", srcName: "Deployment/web", dstNS: "b", dstName: "StatefulSet/api"}, v.disclose(t.Context(), k),
		"in full, only the deny flag goes")
}
