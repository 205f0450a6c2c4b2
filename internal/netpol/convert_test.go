package netpol

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FromAPI: the implicit policy types, rule names by index, ports (default
// TCP, named, ranges) and ipBlocks. The evaluation itself is tested with the
// index that feeds it (internal/k8sindex, policies_test.go).
func TestFromAPI(t *testing.T) {
	sctp := corev1.ProtocolSCTP
	named, num := intstr.FromString("http"), intstr.FromInt32(8000)
	end := int32(8100)
	p := FromAPI(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"},
		Spec: networkingv1.NetworkPolicySpec{
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}, {
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.7/8", Except: []string{"10.1.0.0/16"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &named}, {Port: &num, EndPort: &end, Protocol: &sctp}, {}},
			}},
		},
	})
	assert.True(t, p.Ingress)
	assert.False(t, p.Egress, "no egress rules, no policyTypes: ingress only")
	assert.True(t, p.PodSelector.Empty())
	assert.Equal(t, []string{"ingress-0", "ingress-1"}, []string{p.IngressRules[0].Name, p.IngressRules[1].Name})
	assert.Nil(t, p.IngressRules[0].Peers)
	assert.Equal(t, []Port{{Protocol: ProtocolTCP, Name: "http"}, {Protocol: ProtocolSCTP, Port: 8000, EndPort: 8100}, {Protocol: ProtocolTCP}},
		p.IngressRules[1].Ports)
	assert.Equal(t, &IPBlock{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Except: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}},
		p.IngressRules[1].Peers[0].Block)

	eg := FromAPI(&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{}},
	}})
	assert.True(t, eg.Ingress && eg.Egress, "egress rules without policyTypes: both")
	assert.Equal(t, "egress-0", eg.EgressRules[0].Name)
	only := FromAPI(&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}})
	assert.True(t, !only.Ingress && only.Egress, "policyTypes: [Egress] isolates egress only (default deny egress)")
}
