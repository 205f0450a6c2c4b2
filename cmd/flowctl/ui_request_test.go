package main

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

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

// TestUIStartsWithHistory: flowctl ui -n shop --since 2h prints an address
// whose page asks the stream for shop's flows of the last two hours, then
// live ones: the key traded for the cookie, the redirect keeps the scope and
// the since, from which the page's stream request is built.
func TestUIStartsWithHistory(t *testing.T) {
	u := startUIOffline(t, "--listen", "127.0.0.1:0", "-n", "shop", "--since", "2h")
	printed := regexp.MustCompile(`http://\S+`).FindString(u.stderr.String())
	pu, err := url.Parse(printed)
	require.NoError(t, err)
	require.Equal(t, u.key, pu.Query().Get("key"))
	require.Equal(t, "shop", pu.Query().Get("namespace"))
	require.Equal(t, "2h", pu.Query().Get("since"))

	resp := u.get(t, "", "/?"+pu.RawQuery)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.False(t, loc.Query().Has("key"), loc.String())
	req, err := uiRequest(loc.Query())
	require.NoError(t, err)
	require.True(t, req.Follow)
	require.Equal(t, []string{"shop"}, req.Namespaces)
	require.NotNil(t, req.Since)
	require.WithinDuration(t, time.Now().Add(-2*time.Hour), req.Since.AsTime(), time.Minute)

	// Without them, the page starts empty (it asks for a scope).
	plain := startUIOffline(t, "--listen", "127.0.0.1:0")
	require.Regexp(t, `\?key=[0-9a-f]+ `, plain.stderr.String())

	q, err := uiStart(scopeFlags{clusterWide: true}, "7d")
	require.NoError(t, err)
	require.Equal(t, "clusterWide=true&since=7d", q.Encode())
	_, err = uiStart(scopeFlags{clusterWide: true, namespace: "a"}, "")
	require.ErrorContains(t, err, "exclude each other")

	_, errOut, code := flowctl(context.Background(), "ui", "--kubeconfig", writeKubeconfig(t, `{token: t}`), "--stream-server", "127.0.0.1:1",
		"--listen", "127.0.0.1:0", "--since", "forever")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `--since: "forever" is neither a duration`)
}
