//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowtel/flowtel/testbed/netlab"
)

// deniedGroup is the NFLOG group the test's "CNI" logs dropped packets to.
const deniedGroup = 100

// TestNetworkPolicyDenied: a NetworkPolicy isolates web-b (only web-a may
// reach it), and node-2 enforces it as a netfilter CNI would: NFLOG then
// DROP for anything else to web-b. client-a's connection to web-b is
// reported once, as a denied connection of client-a → web-b with action
// Drop and the isolating policy named (paired with client-a's Node's half,
// no other row), at ClickHouse, IPFIX and OTLP, in
// both address families; web-a's admitted connection names the policy
// with Allow.
func TestNetworkPolicyDenied(t *testing.T) {
	// The shipped node timers (idle 1 s, which the denied path takes too):
	// the client's SYN retries come further apart than that, and must still
	// be one record chain that pairs (issue 41.3).
	b := startBed(t, options{gateways: 1, ipfix: true, otlp: true, poll: time.Second, active: 2 * time.Second, idle: time.Second,
		conntrackExtra: fmt.Sprintf(", denied: {nflog_group: %d}", deniedGroup)})
	ctx := context.Background()
	_, err := b.cp.Admin.NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-b-from-web-a"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-b"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-a"}}}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// node-2 enforces it: web-a's connections pass, everything else new to
	// web-b is logged and dropped.
	webA, webB := b.pods["web-a"], b.pods["web-b"]
	node2 := webB.Node.NS
	for _, fam := range []struct {
		tool     string
		from, to string
	}{{"iptables", webA.IPv4.String(), webB.IPv4.String()}, {"ip6tables", webA.IPv6.String(), webB.IPv6.String()}} {
		for _, rule := range [][]string{
			{"-A", "FORWARD", "-d", fam.to, "-s", fam.from, "-j", "ACCEPT"},
			{"-A", "FORWARD", "-d", fam.to, "-m", "conntrack", "--ctstate", "NEW", "-j", "NFLOG",
				"--nflog-group", fmt.Sprint(deniedGroup), "--nflog-prefix", "ingress drop"},
			{"-A", "FORWARD", "-d", fam.to, "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"},
		} {
			out, err := netlab.Exec(ctx, node2, append([]string{fam.tool}, rule...)...)
			require.NoError(t, err, "%s %v: %s", fam.tool, rule, out)
		}
	}
	// The policy's creationTimestamp has whole seconds: connections start
	// after it, and after the node collectors' informers saw it.
	time.Sleep(2 * time.Second)

	var cases []Case
	for _, v6 := range []bool{false, true} {
		port := uint16(44301)
		if v6 {
			port += 100
		}
		cases = append(cases,
			Case{Name: fmt.Sprintf("denied: client-a to the isolated web-b (IPv6 %v)", v6), From: "pod:client-a", To: "pod:web-b",
				Proto: "tcp", IPv6: v6, Sport: port, Denied: true,
				// node-1's conntrack half (SYN_SENT) pairs with node-2's denied record.
				Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
					CorrelationState: "paired", IngressPolicy: "default/web-b-from-web-a//2", EgressPolicy: "///0"}},
			Case{Name: fmt.Sprintf("admitted: web-a to web-b (IPv6 %v)", v6), From: "pod:web-a", To: "pod:web-b",
				Proto: "tcp", IPv6: v6, Sport: port + 1,
				Expect: Expect{FlowType: 2, SourcePod: "web-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
					CorrelationState: "paired", IngressPolicy: "default/web-b-from-web-a/ingress-0/1"}})
	}
	for _, c := range cases {
		b.run(t, c)
	}
	b.check(t, cases, 90*time.Second)
	// Still once after node-1's half idled out and past the gateway's
	// pairing timeout (10 s): no later unpaired or undenied row.
	time.Sleep(12 * time.Second)
	b.check(t, cases, 10*time.Second)
	b.checkSinks(t, cases, 30*time.Second)

	// Theia's policy view (created by create_schema) has the allowed and
	// the denied connections under the policy: its dashboards' allow/deny
	// panels have rows.
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	var allowed, denied uint64
	require.NoError(t, conn.QueryRow(ctx, `SELECT countIf(ingressNetworkPolicyRuleAction = 1), countIf(ingressNetworkPolicyRuleAction IN (2, 3))
		FROM flowtel_e2e.flows_policy_view WHERE ingressNetworkPolicyNamespace = 'default' AND ingressNetworkPolicyName = 'web-b-from-web-a'`).Scan(&allowed, &denied))
	require.Positive(t, allowed, "flows_policy_view: no allowed row of web-b-from-web-a")
	require.Positive(t, denied, "flows_policy_view: no denied row of web-b-from-web-a")
}
