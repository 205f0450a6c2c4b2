//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
	"github.com/flowtel/flowtel/internal/policyinsight"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// TestRecommendedPoliciesInTheDataPlane is issue 45's data-plane proof of
// `flowctl policy recommend`, on the e2e bed (a real kube-apiserver, the
// netns data plane on three Nodes, flowtel's node and gateway collectors as
// shipped, ClickHouse):
//
//  1. Pods talk: client-a (node-1) to web-a (node-1) and web-b (node-2),
//     directly and through their ClusterIP Services, TCP in both families
//     and UDP. No policy exists yet.
//  2. policyinsight reads those rows from ClickHouse over HTTP with the
//     query flowctl sends (FlowsQuery, AddRow) and recommends policies for
//     Namespace default, as `flowctl policy recommend -n default
//     --min-observed 0s` does; a what-if of them over the same window
//     newly denies nothing.
//  3. The recommended NetworkPolicies are created in the API server, read
//     back, and enforced by the bed's data plane (enforcePolicies).
//  4. The same traffic again: every connection goes through, and its rows
//     name the recommended policies' rules with Allow; no row of the
//     window carries a denial.
//  5. Traffic the recommendation did not see is dropped by the data plane,
//     and its rows name the recommended policy that denies it: web-c
//     (node-3, never seen, so not isolated) to web-b (ingress, dropped at
//     node-2, flowtel-web-b); web-a to web-b (egress, dropped at node-1,
//     flowtel-web-a); client-a to web-b on a port it never used (egress,
//     flowtel-client-a).
//  6. A what-if of the recommendation over the whole window, against the
//     cluster as it was before, newly denies exactly the step-5 flows, by
//     the same policies the data plane's records name.
func TestRecommendedPoliciesInTheDataPlane(t *testing.T) {
	// The node collectors as shipped: they record no Pod labels (pod_labels
	// off), and the labels come from the API server (the bed's Pods are
	// bare Pods), as flowctl takes them.
	b := startBed(t, options{gateways: 2, otlp: true, asShipped: true})
	ctx := context.Background()
	from := time.Now().Add(-2 * time.Second)

	// 1. The traffic the recommendation sees. No policy: no row names one.
	seen := seenCases(45000)
	for i := range seen {
		seen[i].Expect.IngressPolicy, seen[i].Expect.EgressPolicy = "///0", "///0"
	}
	for _, c := range seen {
		b.run(t, c)
	}
	b.check(t, seen, 90*time.Second)
	if t.Failed() {
		return
	}

	// 2. Recommend from the rows, as flowctl does, and verify by what-if.
	before, err := policyinsight.Load(ctx, b.cp.Admin, nil)
	require.NoError(t, err)
	rec, labels := recordedFlows(t, b, from, "default")
	t.Logf("recorded: %d connections in %d flows", rec.Connections(), len(rec.Flows()))
	require.EqualValues(t, len(seen), rec.Connections(), "every connection of step 1 is in the window, once")
	r := policyinsight.Recommend("default", rec.Flows(), policyinsight.RecommendOptions{Isolation: policyinsight.IsolateApplied, APILabels: labels})
	y, err := r.YAML()
	require.NoError(t, err)
	t.Logf("recommended:\n%s", y)
	var names []string
	for _, p := range r.Policies {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"flowtel-client-a", "flowtel-web-a", "flowtel-web-b"}, names, "one policy per workload seen")
	rep, err := policyinsight.WhatIf(before, r.Draft(), rec.Flows())
	require.NoError(t, err)
	assert.Zero(t, rep.NewlyDenied(), "what-if of the recommendation over its own window: %+v", rep.Changes)
	assert.EqualValues(t, len(seen), rep.Connections)

	// 3. Into the API server, and into the data plane.
	createPolicies(t, b, r.Policies...)
	after, err := policyinsight.Load(ctx, b.cp.Admin, nil)
	require.NoError(t, err)
	for _, p := range r.Policies {
		require.True(t, after.Has(policyinsight.Ref{Kind: policyinsight.KindNetworkPolicy, Namespace: "default", Name: p.Name}), p.Name)
	}
	cluster := after.Cluster()
	enforcePolicies(t, b, cluster)

	// 4. The same traffic again, from other source ports: admitted, by the
	// recommended policies' rules on both sides.
	again := seenCases(46000)
	for i := range again {
		again[i].Expect.IngressPolicy, again[i].Expect.EgressPolicy = b.expectedPolicies(t, cluster, again[i])
		require.Contains(t, again[i].Expect.IngressPolicy, "default/flowtel-", again[i].Name)
		require.True(t, strings.HasSuffix(again[i].Expect.IngressPolicy, "/1") && strings.HasSuffix(again[i].Expect.EgressPolicy, "/1"),
			"%s: the recommendation admits it on both sides: %s, %s", again[i].Name, again[i].Expect.IngressPolicy, again[i].Expect.EgressPolicy)
	}
	for _, c := range again {
		b.run(t, c) // fails the test if the data plane drops it
	}
	b.check(t, again, 90*time.Second)
	assert.Zero(t, deniedRows(t, b), "rows with a Drop or Reject after the same traffic ran again")

	// 5. What the recommendation did not see: dropped, and named.
	unseen := unseenCases(47000)
	for _, n := range []string{"client-a", "web-a", "web-c"} {
		out, err := netlab.Exec(ctx, b.pods[n].Node.NS, "sysctl", "-qw",
			fmt.Sprintf("net.netfilter.nf_conntrack_tcp_timeout_syn_sent=%d", int(synSentTimeout.Seconds())))
		require.NoError(t, err, "%s", out)
	}
	for i, res := range b.sendAll(unseen, func(Case) []string { return []string{"-bytes", fmt.Sprint(requestBytes)} }) {
		require.Error(t, res.err, "%s: the connection went through: %s", unseen[i].Name, res.out)
	}
	checkDenied(t, b, unseen)

	// 6. what-if over everything recorded, against the cluster before the
	// recommendation: exactly the unseen flows are newly denied, by the
	// policies the data plane's records name (what-if names every denying
	// side; the data plane drops at the first, the source Node's egress).
	all, _ := recordedFlows(t, b, from, "default")
	rep, err = policyinsight.WhatIf(before, r.Draft(), all.Flows())
	require.NoError(t, err)
	got := map[string]string{}
	for _, c := range rep.Changes {
		if c.After != policyinsight.Denied {
			continue
		}
		var by []string
		for _, rule := range c.Rules {
			by = append(by, fmt.Sprintf("%s:%s/%s", rule.Direction, rule.Namespace, rule.Policy))
		}
		got[fmt.Sprintf("%s -> %s %s/%d", c.Source, c.Destination, c.Protocol, c.Port)] = strings.Join(by, ",")
	}
	want := map[string]string{
		"default/Pod/web-c -> default/Pod/web-b TCP/8080":    "ingress:default/flowtel-web-b",
		"default/Pod/web-a -> default/Pod/web-b TCP/8080":    "egress:default/flowtel-web-a",
		"default/Pod/client-a -> default/Pod/web-b TCP/9090": "egress:default/flowtel-client-a",
	}
	assert.Len(t, got, len(want), "what-if's new denials over the whole window: %v", got)
	for k, by := range want {
		assert.Contains(t, got[k], by, "what-if: %s", k)
	}
	assert.EqualValues(t, len(unseen), rep.NewlyDenied(), "each unseen connection, once")
}

// seenCases are step 1's connections (and step 4's again), from source
// ports base+1... (IPv6 +100): the scenario's Pod to Pod and Pod to
// ClusterIP cases between client-a, web-a and web-b.
func seenCases(base uint16) []Case {
	want := []string{"intra-Node Pod to Pod", "inter-Node Pod to Pod", "inter-Node Pod to Pod over UDP",
		"remote Service access (ClusterIP)", "local Service access (ClusterIP)"}
	var cs []Case
	for _, c := range Cases() {
		if slices.Contains(want, strings.TrimSuffix(c.Name, " (IPv6)")) {
			c.Sport = base + c.Sport%1000
			cs = append(cs, c)
		}
	}
	return cs
}

// unseenCases are step 5's connections, none of which step 1 made: each
// dropped by one side's recommended policy. An ingress Drop between Nodes
// pairs with the source Node's conntrack half; an egress Drop is the
// source Node's record alone (not_required).
func unseenCases(base uint16) []Case {
	var cs []Case
	add := func(c Case, both bool) {
		cs = append(cs, c)
		if both {
			c.Name += " (IPv6)"
			c.IPv6, c.Sport = true, c.Sport+100
			cs = append(cs, c)
		}
	}
	add(Case{Name: "unseen: web-c (node-3, no policy) to web-b", From: "pod:web-c", To: "pod:web-b", Proto: "tcp", Sport: base + 1, Denied: true,
		Expect: Expect{FlowType: 2, SourcePod: "web-c", SourceNode: "node-3", DestinationPod: "web-b", DestinationNode: "node-2",
			CorrelationState: "paired", IngressPolicy: "default/flowtel-web-b//2", EgressPolicy: "///0"}}, true)
	add(Case{Name: "unseen: web-a to web-b", From: "pod:web-a", To: "pod:web-b", Proto: "tcp", Sport: base + 2, Denied: true,
		Expect: Expect{SourcePod: "web-a", SourceNode: "node-1", DestinationPod: "web-b",
			CorrelationState: "not_required", IngressPolicy: "///0", EgressPolicy: "default/flowtel-web-a//2"}}, true)
	add(Case{Name: "unseen: client-a to web-b on a port it never used", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: base + 3,
		Port: 9090, Denied: true,
		Expect: Expect{SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b",
			CorrelationState: "not_required", IngressPolicy: "///0", EgressPolicy: "default/flowtel-client-a//2"}}, false)
	return cs
}

// recordedFlows reads the flows of namespace that ended since from, with
// the query and row reader `flowctl policy` uses, over ClickHouse's HTTP
// interface, and takes their Pods' labels from the API server as flowctl
// does (ResolveLabels): the shipped node collectors record none, which it
// checks.
func recordedFlows(t *testing.T, b *bed, from time.Time, namespace string) (*policyinsight.Recording, *policyinsight.APILabels) {
	t.Helper()
	q := policyinsight.FlowsQuery("`flowtel_e2e`.`flows`", from, namespace)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/", b.ch.HTTPPort), "text/plain", strings.NewReader(q))
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("clickhouse: %s: %s", resp.Status, msg)
	}
	rec := &policyinsight.Recording{}
	dec := json.NewDecoder(resp.Body)
	for {
		var row map[string]json.RawMessage
		err := dec.Decode(&row)
		if errors.Is(err, io.EOF) {
			for _, f := range rec.Flows() {
				require.Nil(t, policyinsight.LabelsOf(f.Source), "labels recorded with pod_labels off: %+v", f.Source)
				require.Nil(t, policyinsight.LabelsOf(f.Destination), "labels recorded with pod_labels off: %+v", f.Destination)
			}
			resolved, labels := policyinsight.ResolveLabels(context.Background(), b.cp.Admin, rec)
			require.Empty(t, labels.Missing, "every Pod of the bed is in the API server")
			return resolved, labels
		}
		require.NoError(t, err)
		require.NoError(t, rec.AddRow(row))
	}
}

// deniedRows counts the flows table's rows with a Drop or Reject on either side.
func deniedRows(t *testing.T, b *bed) uint64 {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	var n uint64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count() FROM flowtel_e2e.flows
		WHERE ingressNetworkPolicyRuleAction IN (2, 3) OR egressNetworkPolicyRuleAction IN (2, 3)`).Scan(&n))
	return n
}

// podEndpoint is Pod name as the evaluator sees it: its labels as the
// API server has them.
func (b *bed) podEndpoint(t *testing.T, name string, v6 bool) netpol.Endpoint {
	t.Helper()
	p := b.pods[name]
	obj, err := b.cp.Admin.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	addr := p.IPv4
	if v6 {
		addr = p.IPv6
	}
	return netpol.Endpoint{Address: addr, Kind: flowrecord.EndpointPod, Namespace: p.Namespace, Labels: obj.Labels}
}

// expectedPolicies are the "namespace/name/rule/action" policy fields of
// an admitted Pod to Pod (or Pod to a Service's Pod) case under cluster.
func (b *bed) expectedPolicies(t *testing.T, cluster netpol.Cluster, c Case) (ingress, egress string) {
	t.Helper()
	dst := strings.TrimPrefix(c.To, "pod:")
	if svc, ok := strings.CutPrefix(c.To, "service:"); ok {
		dst = b.services[svc].Endpoints[0].Name
	}
	d := policyinsight.Decide(cluster, &netpol.Connection{Protocol: protocolNumber(c.Proto),
		Source: b.podEndpoint(t, strings.TrimPrefix(c.From, "pod:"), c.IPv6), Destination: b.podEndpoint(t, dst, c.IPv6),
		Port: 8080, Start: time.Now()})
	field := func(v netpol.Verdict) string {
		p := v.Observed()
		return fmt.Sprintf("%s/%s/%s/%d", p.Namespace, p.Name, p.RuleName, p.RuleAction)
	}
	return field(d.Ingress), field(d.Egress)
}

func protocolNumber(proto string) uint8 {
	if proto == "udp" {
		return netpol.ProtocolUDP
	}
	return netpol.ProtocolTCP
}

// enforcePolicies makes the bed's data plane enforce the cluster's
// policies for its Pods. The enforcer is the test's stand-in for a
// netfilter CNI, driven by flowtel's own NetworkPolicy evaluation
// (internal/netpol through policyinsight.Decide); no third-party enforcer
// runs. It does what such a CNI does on each Pod's Node, in the FORWARD
// chain (every Pod's traffic is routed through its Node's namespace), for
// the first packet of each connection:
//
//   - chain FLOWTEL-EGRESS: for each Pod of this Node isolated for egress,
//     the (destination Pod, protocol, port) its policies admit return; any
//     other new connection from it is logged to NFLOG group deniedGroup
//     with prefix "egress drop" and dropped;
//   - chain FLOWTEL-INGRESS: the same for each Pod of this Node isolated
//     for ingress, by source Pod, with prefix "ingress drop".
//
// What is admitted is decided by evaluating, for every ordered pair of the
// bed's Pods and each protocol and port the test uses (TCP and UDP 8080,
// TCP 9090), the connection against cluster: a rule is written for each
// Allowed side. Anything not evaluated (other ports, Node or external
// peers) is denied for an isolated Pod: the stand-in can only deny more
// than the policies, never admit more. An Undetermined verdict fails the
// test, as the Pods' labels are known.
func enforcePolicies(t *testing.T, b *bed, cluster netpol.Cluster) {
	t.Helper()
	type key struct {
		pod     string
		ingress bool
	}
	isolated := map[key]bool{}
	admits := map[key][]string{} // "peer proto port"
	var names []string
	for n := range b.pods {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, src := range names {
		for _, dst := range names {
			if src == dst {
				continue
			}
			for _, pp := range []struct {
				proto string
				port  uint16
			}{{"tcp", 8080}, {"udp", 8080}, {"tcp", 9090}} {
				d := policyinsight.Decide(cluster, &netpol.Connection{Protocol: protocolNumber(pp.proto),
					Source: b.podEndpoint(t, src, false), Destination: b.podEndpoint(t, dst, false), Port: pp.port, Start: time.Now()})
				for _, side := range []struct {
					v             netpol.Verdict
					subject, peer string
					ingress       bool
				}{{d.Ingress, dst, src, true}, {d.Egress, src, dst, false}} {
					k := key{side.subject, side.ingress}
					switch side.v.Outcome {
					case netpol.Undetermined:
						t.Fatalf("%s -> %s %s/%d: undetermined", src, dst, pp.proto, pp.port)
					case netpol.Allowed:
						isolated[k] = true
						admits[k] = append(admits[k], fmt.Sprintf("%s %s %d", side.peer, pp.proto, pp.port))
					case netpol.Denied:
						isolated[k] = true
					}
				}
			}
		}
	}
	for _, fam := range []struct {
		tool string
		v6   bool
	}{{"iptables", false}, {"ip6tables", true}} {
		addr := func(name string) string {
			if fam.v6 {
				return b.pods[name].IPv6.String()
			}
			return b.pods[name].IPv4.String()
		}
		rules := map[string][][]string{} // by Node namespace
		for _, n := range b.lab.Nodes {
			rules[n.NS] = [][]string{{"-N", "FLOWTEL-EGRESS"}, {"-N", "FLOWTEL-INGRESS"},
				{"-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW", "-j", "FLOWTEL-EGRESS"},
				{"-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW", "-j", "FLOWTEL-INGRESS"}}
		}
		for _, pod := range names {
			for _, ingress := range []bool{false, true} {
				k := key{pod, ingress}
				if !isolated[k] {
					continue
				}
				chain, self, other, prefix := "FLOWTEL-EGRESS", "-s", "-d", "egress drop"
				if ingress {
					chain, self, other, prefix = "FLOWTEL-INGRESS", "-d", "-s", "ingress drop"
				}
				ns := b.pods[pod].Node.NS
				for _, a := range admits[k] {
					f := strings.Fields(a)
					rules[ns] = append(rules[ns], []string{"-A", chain, self, addr(pod), other, addr(f[0]), "-p", f[1], "--dport", f[2], "-j", "RETURN"})
				}
				rules[ns] = append(rules[ns],
					[]string{"-A", chain, self, addr(pod), "-j", "NFLOG", "--nflog-group", fmt.Sprint(deniedGroup), "--nflog-prefix", prefix},
					[]string{"-A", chain, self, addr(pod), "-j", "DROP"})
			}
		}
		for ns, rs := range rules {
			for _, rule := range rs {
				out, err := netlab.Exec(context.Background(), ns, append([]string{fam.tool}, rule...)...)
				require.NoError(t, err, "%s %v: %s", fam.tool, rule, out)
			}
		}
	}
	for k, a := range admits {
		t.Logf("enforced: %s (ingress %v) admits %v", k.pod, k.ingress, a)
	}
}
