package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dotGraph is what parseDOT reads back of a digraph.
type dotGraph struct {
	attrs    map[string]string            // graph [...]
	nodes    map[string]map[string]string // id → attributes
	clusters map[string][]string          // cluster label → node ids
	edges    map[string]map[string]string // "from -> to", plus " (outcome)" unless ok → attributes
}

// dotTokens splits DOT into quoted strings (unescaped, marked by a leading
// quote), words and the punctuation { } [ ] ; , = ->.
func dotTokens(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case unicode.IsSpace(rune(c)):
			i++
		case c == '"':
			var b strings.Builder
			b.WriteByte('"')
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
					if s[i] == 'n' {
						b.WriteByte('\n')
						continue
					}
				}
				b.WriteByte(s[i])
			}
			require.Less(t, i, len(s), "unterminated string")
			out = append(out, b.String())
			i++
		case strings.HasPrefix(s[i:], "->"):
			out = append(out, "->")
			i += 2
		case strings.ContainsRune("{}[];,=", rune(c)):
			out = append(out, string(c))
			i++
		default:
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && !strings.ContainsRune("{}[];,=\"", rune(s[j])) && !strings.HasPrefix(s[j:], "->") {
				j++
			}
			require.Greater(t, j, i, "unexpected %q", s[i:])
			out = append(out, s[i:j])
			i = j
		}
	}
	return out
}

// parseDOT parses the digraphs writeDOT writes: graph/node/edge defaults,
// clusters with attribute statements, node and edge statements.
func parseDOT(t *testing.T, s string) dotGraph {
	t.Helper()
	toks := dotTokens(t, s)
	g := dotGraph{attrs: map[string]string{}, nodes: map[string]map[string]string{}, clusters: map[string][]string{}, edges: map[string]map[string]string{}}
	pos := 0
	next := func() string {
		require.Less(t, pos, len(toks), "unexpected end of the graph")
		pos++
		return toks[pos-1]
	}
	expect := func(want string) { require.Equal(t, want, next(), "at token %d", pos) }
	id := func(tok string) string { return strings.TrimPrefix(tok, `"`) }
	attrs := func() map[string]string {
		m := map[string]string{}
		if pos < len(toks) && toks[pos] == "[" {
			pos++
			for toks[pos] != "]" {
				k := id(next())
				expect("=")
				m[k] = id(next())
				if toks[pos] == "," {
					pos++
				}
			}
			pos++
		}
		return m
	}
	expect("digraph")
	next() // name
	expect("{")
	var cluster string
	var clusterAttrs map[string]string
	for {
		tok := next()
		switch {
		case tok == "}" && cluster != "":
			g.clusters[clusterAttrs["label"]] = g.clusters[cluster]
			if clusterAttrs["label"] != cluster {
				delete(g.clusters, cluster)
			}
			cluster = ""
			continue
		case tok == "}":
			require.Equal(t, len(toks), pos, "tokens after the graph")
			return g
		case tok == "graph":
			g.attrs = attrs()
		case tok == "node" || tok == "edge":
			attrs()
		case tok == "subgraph":
			cluster = id(next())
			require.True(t, strings.HasPrefix(cluster, "cluster_"), cluster)
			expect("{")
			clusterAttrs = map[string]string{}
			g.clusters[cluster] = nil
			continue
		case pos < len(toks) && toks[pos] == "=":
			pos++
			require.NotEmpty(t, cluster, "attribute statement %s outside a cluster", tok)
			clusterAttrs[id(tok)] = id(next())
		case pos < len(toks) && toks[pos] == "->":
			pos++
			to := id(next())
			a := attrs()
			k := id(tok) + " -> " + to
			if a["outcome"] != "ok" {
				k += " (" + a["outcome"] + ")"
			}
			require.NotContains(t, g.edges, k, "two edges %s", k)
			g.edges[k] = a
		default:
			g.nodes[id(tok)] = attrs()
			if cluster != "" {
				g.clusters[cluster] = append(g.clusters[cluster], id(tok))
			}
		}
		expect(";")
	}
}

// The demo's map (deploy/dashboards/demodata, grouped by workload): vertex →
// kind, and each edge's connections and bytes. The refused and the denied
// connection have edges of their own beside their pair's.
var (
	demoVertices = map[string]string{
		"workload/default/Deployment/client":   "workload",
		"workload/default/StatefulSet/web-far": "workload",
		"pod/default/web-a":                    "pod",
		"pod/default/web-b":                    "pod",
		"node/node-1":                          "node",
		"node/node-2":                          "node",
		"external/192.0.2.80":                  "external",
		"external/198.51.100.7":                "external",
	}
	demoEdges = map[string][2]uint64{
		"workload/default/Deployment/client -> pod/default/web-a":                             {1, 5000},
		"workload/default/Deployment/client -> pod/default/web-b":                             {1, 5000},
		"workload/default/Deployment/client -> pod/default/web-b (refused)":                   {1, 100},
		"workload/default/Deployment/client -> workload/default/StatefulSet/web-far":          {1, 5000},
		"workload/default/Deployment/client -> workload/default/StatefulSet/web-far (denied)": {1, 60},
		"workload/default/Deployment/client -> external/192.0.2.80":                           {1, 5000},
		"node/node-1 -> pod/default/web-a":                                                    {1, 5000},
		"node/node-1 -> pod/default/web-b":                                                    {1, 5000},
		"external/198.51.100.7 -> pod/default/web-b":                                          {1, 5000},
		"pod/default/web-b -> node/node-2":                                                    {1, 1200},
	}
)

// checkDemoMap checks a parsed map against the demo's: its vertices, the
// default Namespace's cluster, every edge's numbers and its marks.
func checkDemoMap(t *testing.T, g dotGraph) {
	t.Helper()
	kinds := map[string]string{}
	for id, a := range g.nodes {
		kinds[id] = a["kind"]
	}
	assert.Equal(t, demoVertices, kinds)
	var inDefault []string
	for id := range demoVertices {
		if strings.Contains(id, "/default/") {
			inDefault = append(inDefault, id)
		}
	}
	assert.ElementsMatch(t, inDefault, g.clusters["default"], "the default Namespace's cluster")
	assert.Len(t, g.clusters, 1, "one cluster per Namespace")
	assert.Equal(t, "Deployment client", g.nodes["workload/default/Deployment/client"]["label"])
	got := map[string][2]uint64{}
	for k, a := range g.edges {
		var n [2]uint64
		for i, c := range []string{"connections", "bytes"} {
			_, err := fmt.Sscan(a[c], &n[i])
			require.NoError(t, err, "%s: %s=%q", k, c, a[c])
		}
		got[k] = n
		switch a["outcome"] {
		case "refused":
			assert.Equal(t, []string{"dashed", "#ff7f0e"}, []string{a["style"], a["color"]}, "%s: refused marked", k)
			assert.True(t, strings.HasPrefix(a["label"], "refused: "), "%s: %q", k, a["label"])
		case "denied":
			assert.Equal(t, []string{"bold", "#d62728", "tee"}, []string{a["style"], a["color"], a["arrowhead"]}, "%s: denied marked", k)
			assert.True(t, strings.HasPrefix(a["label"], "denied: "), "%s: %q", k, a["label"])
		default:
			assert.Equal(t, "ok", a["outcome"], k)
			assert.Empty(t, a["color"], "%s: an ok edge is not marked", k)
		}
	}
	assert.Equal(t, demoEdges, got)
	assert.Equal(t, "refused: 1 connection, 100 B", g.edges["workload/default/Deployment/client -> pod/default/web-b (refused)"]["label"])
	assert.Equal(t, "1 connection, 5.0 kB", g.edges["workload/default/Deployment/client -> pod/default/web-b"]["label"])
	assert.Contains(t, g.attrs["label"], "10 connections, 36.4 kB")
}

// demoFlows is the demo's set as a source hands it to the map (one entry per
// connection, as the flow stream's reader does).
func demoFlows() []mapFlow {
	client := flowEnd{Kind: "pod", Namespace: "default", Pod: "client-a", WorkloadKind: "Deployment", Workload: "client", Node: "node-1", Address: "10.244.1.2"}
	webA := flowEnd{Kind: "pod", Namespace: "default", Pod: "web-a", Node: "node-1"}
	webB := flowEnd{Kind: "pod", Namespace: "default", Pod: "web-b", Node: "node-2"}
	webC := flowEnd{Kind: "pod", Namespace: "default", Pod: "web-c", WorkloadKind: "StatefulSet", Workload: "web-far", Node: "node-3"}
	node1 := flowEnd{Kind: "node", Node: "node-1", Address: "10.244.1.1"}
	node2 := flowEnd{Kind: "node", Node: "node-2"}
	return []mapFlow{
		{Src: client, Dst: webA, Connections: 1, Bytes: 5000},
		{Src: client, Dst: webB, Connections: 1, Bytes: 5000},
		{Src: node1, Dst: webA, Connections: 1, Bytes: 5000},
		{Src: node1, Dst: webB, Connections: 1, Bytes: 5000},
		{Src: client, Dst: flowEnd{Kind: "external", Address: "192.0.2.80"}, Connections: 1, Bytes: 5000},
		{Src: flowEnd{Kind: "external", Address: "198.51.100.7"}, Dst: webB, Connections: 1, Bytes: 5000},
		{Src: webB, Dst: node2, Connections: 1, Bytes: 1200},
		{Src: client, Dst: webB, Connections: 1, Bytes: 100, Outcome: outcomeRefused},
		{Src: client, Dst: webC, Connections: 1, Bytes: 5000},
		{Src: client, Dst: webC, Connections: 1, Bytes: 60, Outcome: outcomeDenied},
	}
}

func TestMapDOT(t *testing.T) {
	g := newGraph(true)
	for _, f := range demoFlows() {
		g.add(f)
	}
	var b bytes.Buffer
	require.NoError(t, g.writeDOT(&b, "demo"))
	checkDemoMap(t, parseDOT(t, b.String()))

	// By Pod: the workloads' Pods are the nodes.
	g = newGraph(false)
	for _, f := range demoFlows() {
		g.add(f)
	}
	b.Reset()
	require.NoError(t, g.writeDOT(&b, "demo"))
	p := parseDOT(t, b.String())
	assert.Contains(t, p.nodes, "pod/default/client-a")
	assert.Contains(t, p.edges, "pod/default/client-a -> pod/default/web-c")
	assert.NotContains(t, p.nodes, "workload/default/Deployment/client")
}

func TestMapEnds(t *testing.T) {
	for _, c := range []struct {
		end  flowEnd
		want vertex
	}{
		{flowEnd{Redacted: true, Namespace: "ns-b"}, vertex{ID: "redacted/ns-b", Kind: "redacted", Namespace: "ns-b", Label: "[redacted]"}},
		{flowEnd{Pod: "p", Namespace: "n", Workload: "w"}, vertex{ID: "workload/n/Workload/w", Kind: "workload", Namespace: "n", Label: "Workload w"}},
		{flowEnd{Node: "node-1"}, vertex{ID: "node/node-1", Kind: "node", Label: "node-1"}},
		{flowEnd{Kind: "external", Node: "", Address: ""}, vertex{ID: "external/unknown", Kind: "external", Label: "unknown"}},
		{flowEnd{Kind: "external", Address: "2001:db8::1"}, vertex{ID: "external/2001:db8::1", Kind: "external", Label: "2001:db8::1"}},
	} {
		assert.Equal(t, c.want, c.end.vertex(true))
	}
	assert.Equal(t, "999 B", humanBytes(999))
	assert.Equal(t, "36.4 kB", humanBytes(36360))
	assert.Equal(t, "1.5 GB", humanBytes(1_500_000_000))
	assert.Equal(t, `"a\"b\\c\nd"`, quote("a\"b\\c\nd"))
}

func TestMapFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--group", "node"}, `--group: "node" is not workload or pod`},
		{[]string{"-o", "map.jpg"}, `-o: "map.jpg" does not end in .dot, .gv, .svg, .png or .pdf`},
		{[]string{"--since", "yesterday"}, `--since: "yesterday" is neither a duration`},
		{[]string{"--clickhouse", "tcp://127.0.0.1:9000"}, `--clickhouse: "tcp://127.0.0.1:9000" is not an http:// or https:// URL`},
		{[]string{"--clickhouse", "http://127.0.0.1:1", "--table", "fl`ows"}, "is not a plain ClickHouse name"},
	} {
		var o, e bytes.Buffer
		code := run(context.Background(), append([]string{"map"}, c.args...), &o, &e)
		assert.Equal(t, 1, code, "%v", c.args)
		assert.Contains(t, e.String(), c.want, "%v", c.args)
	}
}

// The ClickHouse password goes in cleartext over http:// only to loopback
// (a port-forward) or with --send-password-over-plain-http.
func TestMapClickHousePasswordOverPlainHTTP(t *testing.T) {
	t.Setenv("CLICKHOUSE_PASSWORD", "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, u := range []string{"http://192.0.2.1:8123", "http://clickhouse.example:8123"} {
		_, errOut, code := flowctl(ctx, "map", "--clickhouse", u, "--clickhouse-user", "flows")
		require.Equal(t, 1, code, errOut)
		require.Contains(t, errOut, "--clickhouse "+u+": refusing to send $CLICKHOUSE_PASSWORD over plain HTTP to a non-loopback host", u)
		require.Contains(t, errOut, "--send-password-over-plain-http", u)
	}
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, got, _ = r.BasicAuth()
	}))
	defer srv.Close()
	_, errOut, code := flowctl(ctx, "map", "--clickhouse", srv.URL, "--clickhouse-user", "flows")
	require.Zero(t, code, errOut)
	require.Equal(t, "s3cret", got, "loopback: a port-forward")
}
