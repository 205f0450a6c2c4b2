//go:build integration

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNetworkPolicyAttribution: NetworkPolicy objects admitting client-a →
// web-b (web-b's ingress, client-a's egress) are named in the paired record
// at ClickHouse, IPFIX and OTLP: node-2 names web-b's ingress policy, node-1
// client-a's egress policy, and the gateway merges the two halves. A
// connection from client-a to web-a (same Node, no policy selects web-a)
// carries only the egress policy.
func TestNetworkPolicyAttribution(t *testing.T) {
	b := startBed(t, options{gateways: 1, ipfix: true, otlp: true})
	ctx := context.Background()
	app := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	for _, np := range []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-b-from-client"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *app("web-b"),
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: app("client-a")}}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "client-a-egress"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *app("client-a"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}},
				{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}},
			},
		}},
	} {
		_, err := b.cp.Admin.NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// The policies' creationTimestamp has whole seconds: connections start
	// after it, and after the node collectors' informers saw the policies.
	time.Sleep(2 * time.Second)

	cases := []Case{
		{Name: "inter-Node Pod to Pod admitted by policies on both sides", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: 44201,
			Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
				CorrelationState: "paired",
				IngressPolicy:    "default/web-b-from-client/ingress-0/1", EgressPolicy: "default/client-a-egress/egress-1/1"}},
		{Name: "intra-Node Pod to an unisolated Pod", From: "pod:client-a", To: "pod:web-a", Proto: "tcp", Sport: 44202,
			Expect: Expect{FlowType: 1, SourcePod: "client-a", DestinationPod: "web-a", CorrelationState: "not_required",
				IngressPolicy: "///0", EgressPolicy: "default/client-a-egress/egress-1/1"}},
	}
	for _, c := range cases {
		b.run(t, c)
	}
	b.check(t, cases, 90*time.Second)
	b.checkSinks(t, cases, 30*time.Second)
}
