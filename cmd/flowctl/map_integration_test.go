//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/deploy/dashboards/demodata"
	"github.com/flowtel/flowtel/testbed/chserver"
)

// TestMapFromClickHouse: flowctl map reads the demo's records, written by the
// clickhouse_flows exporter into a real ClickHouse, over HTTP and draws the
// demo's map; through Graphviz's dot (CI installs graphviz) as SVG and PNG.
func TestMapFromClickHouse(t *testing.T) {
	srv := chserver.Start(t, chserver.Options{})
	demodata.Write(t, srv, "dash", demodata.Records(time.Now()))
	ctx := context.Background()
	base := []string{"map", "--clickhouse", fmt.Sprintf("http://127.0.0.1:%d", srv.HTTPPort), "--database", "dash", "--since", "10m"}

	out, errOut, code := flowctl(ctx, base...)
	require.Zero(t, code, errOut)
	checkDemoMap(t, parseDOT(t, out))

	// A window that starts after every flow: a graph without edges.
	out, errOut, code = flowctl(ctx, "map", "--clickhouse", fmt.Sprintf("http://127.0.0.1:%d", srv.HTTPPort), "--database", "dash", "--since", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.Zero(t, code, errOut)
	assert.Empty(t, parseDOT(t, out).edges)

	_, errOut, code = flowctl(ctx, "map", "--clickhouse", fmt.Sprintf("http://127.0.0.1:%d", srv.HTTPPort), "--database", "dash", "--table", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "clickhouse: 404 Not Found")
	assert.Contains(t, errOut, "nope")

	_, err := exec.LookPath("dot")
	require.NoError(t, err, "Graphviz's dot is not installed (scripts/deps.sh installs graphviz)")
	dir := t.TempDir()
	svg := filepath.Join(dir, "map.svg")
	_, errOut, code = flowctl(ctx, append(base, "-o", svg)...)
	require.Zero(t, code, errOut)
	assert.Contains(t, errOut, "wrote "+svg+" (8 nodes, 10 edges)")
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	for id := range demoVertices { // dot writes - as &#45;
		title := "<title>" + strings.ReplaceAll(id, "-", "&#45;") + "</title>"
		assert.True(t, strings.Contains(string(b), title), "the SVG has no %s", title)
	}
	assert.True(t, strings.Contains(string(b), "<title>cluster_default</title>"), "the SVG has no cluster default")
	assert.True(t, strings.Contains(string(b), ">refused: 1 connection, 100 B</text>"), "the SVG marks no refused edge")
	png := filepath.Join(dir, "map.png")
	_, errOut, code = flowctl(ctx, append(base, "-o", png)...)
	require.Zero(t, code, errOut)
	b, err = os.ReadFile(png)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("\x89PNG")), "a PNG")
}

// TestMapFromTheStream: flowctl map reads the demo's records from the flow
// stream (a real flow_stream exporter and kube-apiserver) with a cluster-wide
// viewer's credentials. The stream carries no workloads or endpoint kinds:
// Pods are the nodes, a named Node a Node.
func TestMapFromTheStream(t *testing.T) {
	e := startEnv(t)
	recs := demodata.Records(time.Now())
	for _, r := range recs {
		r.Key = r.CorrelationKey()
	}
	e.push(t, recs...)
	tok := e.cp.ServiceAccount(t, "team", "ops")
	_, err := e.cp.Admin.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flows-ops"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antrea-flow-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team", Name: "ops"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kc := e.cp.Kubeconfig(t, "ops", tok)

	out, errOut, code := flowctl(context.Background(), "map", "--kubeconfig", kc, "--stream-server", e.addr, "--ca-file", e.ca, "--cluster-wide", "--since", "10m")
	require.Zero(t, code, errOut)
	g := parseDOT(t, out)
	kinds := map[string]string{}
	for id, a := range g.nodes {
		kinds[id] = a["kind"]
	}
	assert.Equal(t, map[string]string{"pod/default/client-a": "pod", "pod/default/web-a": "pod", "pod/default/web-b": "pod", "pod/default/web-c": "pod",
		"node/node-1": "node", "node/node-2": "node", "external/192.0.2.80": "external", "external/198.51.100.7": "external"}, kinds)
	assert.ElementsMatch(t, []string{"pod/default/client-a", "pod/default/web-a", "pod/default/web-b", "pod/default/web-c"}, g.clusters["default"])
	edge := func(k string) map[string]string {
		a, ok := g.edges[k]
		require.True(t, ok, "no edge %s in %v", k, g.edges)
		return a
	}
	a := edge("pod/default/client-a -> pod/default/web-b (refused)")
	assert.Equal(t, []string{"1", "100"}, []string{a["connections"], a["bytes"]})
	a = edge("pod/default/client-a -> pod/default/web-c (denied)")
	assert.Equal(t, []string{"1", "60"}, []string{a["connections"], a["bytes"]})
	assert.Equal(t, "5000", edge("pod/default/client-a -> pod/default/web-c")["bytes"])
	assert.Equal(t, "5000", edge("node/node-1 -> pod/default/web-a")["bytes"])
	assert.Equal(t, "1200", edge("pod/default/web-b -> node/node-2")["bytes"])
	assert.Equal(t, "1", edge("pod/default/client-a -> external/192.0.2.80")["connections"])
}
