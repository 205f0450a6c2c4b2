//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flowtel/flowtel/testbed/netlab"
)

// The denied connections below run the way the shipped configurations run
// (options.asShipped, two gateway replicas): the node collectors' denied path
// with its defaults (`denied: {}`: NFLOG group 100, the receiver's active and
// idle timeouts), file_storage, the gateway's Kubernetes index. Two halves of
// each connection must meet at the gateway within its pairing timeout: the
// source Node's conntrack half (SYN_SENT) and the destination Node's record
// of the dropped packets. With the denied path's former defaults (15 s idle,
// 1 min active) the second came after the gateway had exported the first
// alone, unpaired and without the denial. The source Node's SYN_SENT entry
// then outlives the pair at the gateway; its end must not start a second,
// unpaired chain.

// TestDeniedByPort: web-b is isolated by an ingress NetworkPolicy whose only
// rule admits client-a, on another port (9090). client-a's connection to
// web-b:8080 is dropped by node-2; its record names that policy with
// action Drop (no rule: none admitted it), in both address families, and
// no row of the connection says otherwise.
func TestDeniedByPort(t *testing.T) {
	b := startBed(t, options{gateways: 2, otlp: true, asShipped: true})
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(9090)
	createPolicies(t, b, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-b-from-client-a-on-9090"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *appSelector("web-b"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: appSelector("client-a")}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	})
	enforceIngress(t, b, "web-b", map[string]string{"client-a": "9090"})

	cases := deniedCases("denied by port", 44501, "default/web-b-from-client-a-on-9090//2", "///0")
	runDenied(t, b, cases)
	checkDenied(t, b, cases)
}

// TestDeniedAtIngressAfterEgressAllowed: client-a's egress policy admits
// web-b on 8080; web-b's ingress policy admits web-a only. client-a's
// connection to web-b passes node-1 and is dropped by node-2: its record
// names the egress policy with Allow and the ingress policy with Drop, in
// both address families, with no row of the connection naming less.
func TestDeniedAtIngressAfterEgressAllowed(t *testing.T) {
	b := startBed(t, options{gateways: 2, otlp: true, asShipped: true})
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	createPolicies(t, b,
		&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "client-a-to-web-b"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: *appSelector("client-a"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{PodSelector: appSelector("web-b")}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				}},
			},
		},
		&networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "web-b-from-web-a"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: *appSelector("web-b"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: appSelector("web-a")}},
				}},
			},
		})
	enforceIngress(t, b, "web-b", map[string]string{"web-a": ""})

	cases := deniedCases("egress allowed, ingress denied", 44601, "default/web-b-from-web-a//2", "default/client-a-to-web-b/egress-0/1")
	runDenied(t, b, cases)
	checkDenied(t, b, cases)
}

// deniedCases are client-a's connection to web-b:8080 in both families
// (source ports sport and sport+100), which node-2 drops: one paired record
// chain with the policies given ("namespace/name/rule/action").
func deniedCases(name string, sport uint16, ingress, egress string) []Case {
	var cases []Case
	for _, v6 := range []bool{false, true} {
		c := Case{Name: fmt.Sprintf("%s: client-a to web-b:8080 (IPv6 %v)", name, v6),
			From: "pod:client-a", To: "pod:web-b", Proto: "tcp", IPv6: v6, Sport: sport, Denied: true,
			Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
				CorrelationState: "paired", IngressPolicy: ingress, EgressPolicy: egress}}
		if v6 {
			c.Sport += 100
		}
		cases = append(cases, c)
	}
	return cases
}

func appSelector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

// createPolicies creates NetworkPolicies in default and waits until
// connections start after them: their creationTimestamp has whole seconds,
// and the node collectors' informers must have seen them.
func createPolicies(t *testing.T, b *bed, nps ...*networkingv1.NetworkPolicy) {
	t.Helper()
	for _, np := range nps {
		_, err := b.cp.Admin.NetworkingV1().NetworkPolicies("default").Create(context.Background(), np, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	time.Sleep(2 * time.Second)
}

// enforceIngress makes the destination Pod's Node enforce an ingress policy
// as a netfilter CNI does: new connections to pod from the admitted Pods
// (on the given destination port, "" for any) pass; any other is logged to
// the NFLOG group `denied: {}` reads (deniedGroup) and dropped.
func enforceIngress(t *testing.T, b *bed, pod string, admitted map[string]string) {
	t.Helper()
	dst := b.pods[pod]
	for _, fam := range []struct {
		tool string
		v6   bool
	}{{"iptables", false}, {"ip6tables", true}} {
		addr := func(name string) string {
			p := b.pods[name]
			if fam.v6 {
				return p.IPv6.String()
			}
			return p.IPv4.String()
		}
		var rules [][]string
		for from, port := range admitted {
			rule := []string{"-A", "FORWARD", "-d", addr(pod), "-s", addr(from)}
			if port != "" {
				rule = append(rule, "-p", "tcp", "--dport", port)
			}
			rules = append(rules, append(rule, "-j", "ACCEPT"))
		}
		rules = append(rules,
			[]string{"-A", "FORWARD", "-d", addr(pod), "-m", "conntrack", "--ctstate", "NEW", "-j", "NFLOG",
				"--nflog-group", fmt.Sprint(deniedGroup), "--nflog-prefix", "ingress drop"},
			[]string{"-A", "FORWARD", "-d", addr(pod), "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"})
		for _, rule := range rules {
			out, err := netlab.Exec(context.Background(), dst.Node.NS, append([]string{fam.tool}, rule...)...)
			require.NoError(t, err, "%s %v: %s", fam.tool, rule, out)
		}
	}
}

// synSentTimeout is how long the source Node's conntrack keeps the denied
// connection's unanswered entry (the kernel's default is 120 s): short, so
// that its DESTROY event, and the end-of-flow record it brings long after
// the gateway exported the pair and forgot it, come within the test.
const synSentTimeout = 12 * time.Second

// runDenied shortens the source Node's SYN_SENT timeout, then starts the
// denied cases at once.
func runDenied(t *testing.T, b *bed, cases []Case) {
	t.Helper()
	ns := b.pods["client-a"].Node.NS
	out, err := netlab.Exec(context.Background(), ns, "sysctl", "-qw",
		fmt.Sprintf("net.netfilter.nf_conntrack_tcp_timeout_syn_sent=%d", int(synSentTimeout.Seconds())))
	require.NoError(t, err, "%s", out)
	for i, r := range b.sendAll(cases, func(Case) []string { return []string{"-bytes", fmt.Sprint(requestBytes)} }) {
		require.Error(t, r.err, "%s: the connection went through: %s", cases[i].Name, r.out)
	}
}

// checkDenied checks the denied cases' rows once they arrived, again after
// every half and timer had its time (the source Node's SYN_SENT entry
// destroyed, the gateway's pairing timeout of the late end-of-flow record
// that brings), and the OTLP sink's records.
func checkDenied(t *testing.T, b *bed, cases []Case) {
	t.Helper()
	b.check(t, cases, 90*time.Second)
	time.Sleep(synSentTimeout + 25*time.Second)
	b.check(t, cases, 10*time.Second)
	b.checkSinks(t, cases, 30*time.Second)
}
