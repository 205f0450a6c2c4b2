package main

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
)

func TestUIRequest(t *testing.T) {
	q, _ := url.ParseQuery("namespace=shop&pod=web,api&selector=app%3Dweb&service=cart&ip=10.0.0.0/8&flowType=to-external&direction=to&since=5m")
	req, err := uiRequest(q)
	require.NoError(t, err)
	require.True(t, req.Follow)
	require.Equal(t, []string{"shop"}, req.Namespaces)
	f := req.Filters[0]
	require.Equal(t, []string{"web", "api"}, f.PodNames)
	require.Equal(t, "app=web", f.PodLabelSelector)
	require.Equal(t, []string{"cart"}, f.ServiceNames)
	require.Equal(t, []string{"10.0.0.0/8"}, f.Ips)
	require.Equal(t, []pb.FlowType{pb.FlowType_FLOW_TYPE_TO_EXTERNAL}, f.FlowTypes)
	require.Equal(t, pb.FlowFilterDirection_FLOW_FILTER_DIRECTION_TO, f.Direction)
	require.NotNil(t, req.Since)

	q, _ = url.ParseQuery("clusterWide=true&namespace=ignored")
	req, err = uiRequest(q)
	require.NoError(t, err)
	require.True(t, req.ClusterWide)
	require.Empty(t, req.Namespaces)

	for query, msg := range map[string]string{
		"":                          "pick a Namespace, or cluster-wide",
		"namespace=a&direction=up":  `direction: "up" is not both, from or to`,
		"namespace=a&flowType=x":    `flow type: "x" is not intra-node`,
		"namespace=a&ip=10.0.0/8":   `ip: "10.0.0/8" is not an IP address or CIDR`,
		"namespace=a&since=forever": `since: "forever" is neither a duration`,
	} {
		q, _ := url.ParseQuery(query)
		_, err := uiRequest(q)
		require.ErrorContains(t, err, msg, query)
	}
}
