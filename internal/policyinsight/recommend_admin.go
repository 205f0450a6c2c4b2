package policyinsight

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
)

// Kinds Recommend writes.
const (
	RecommendNetworkPolicies = "np"
	RecommendAdminPolicies   = "anp"
)

var adminType = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: KindAdminNetworkPolicy}

// everything is what an isolating Deny rule names: every Pod, and (egress)
// every address.
var (
	allNamespaces = &metav1.LabelSelector{}
	allNetworks   = []v1alpha1.CIDR{"0.0.0.0/0", "::/0"}
)

// adminFrom turns a recommended NetworkPolicy into the AdminNetworkPolicy
// that admits the same, at priority: its Allow rules with the same peers
// and ports, then Deny rules for every other Pod (and, for egress, every
// address). An AdminNetworkPolicy's ingress peers are Pods and Namespaces
// only: the NetworkPolicy's ipBlock ingress rules (Nodes, external
// clients) have no counterpart, and such traffic is left to the
// NetworkPolicies (the Deny rule does not match it either); a note says so.
func adminFrom(np *networkingv1.NetworkPolicy, priority int32, rec *Recommendation) *v1alpha1.AdminNetworkPolicy {
	ns := np.Namespace
	podSel := np.Spec.PodSelector
	anp := &v1alpha1.AdminNetworkPolicy{
		TypeMeta:   adminType,
		ObjectMeta: metav1.ObjectMeta{Name: policyName(ns + "-" + np.Name[len("flowtel-"):])},
		Spec: v1alpha1.AdminNetworkPolicySpec{Priority: priority, Subject: v1alpha1.AdminNetworkPolicySubject{
			Pods: &v1alpha1.NamespacedPod{NamespaceSelector: *namespaceNamed(ns), PodSelector: podSel}}},
	}
	for i, r := range np.Spec.Ingress {
		var from []v1alpha1.AdminNetworkPolicyIngressPeer
		for _, p := range r.From {
			if p.IPBlock != nil {
				rec.Notes = append(rec.Notes, fmt.Sprintf("%s: ingress from %s is not expressible in an AdminNetworkPolicy: the NetworkPolicies decide it", anp.Name, p.IPBlock.CIDR))
				continue
			}
			nsSel, pods := adminPeer(ns, p)
			if pods == nil {
				from = append(from, v1alpha1.AdminNetworkPolicyIngressPeer{Namespaces: nsSel})
			} else {
				from = append(from, v1alpha1.AdminNetworkPolicyIngressPeer{Pods: pods})
			}
		}
		if len(from) > 0 {
			anp.Spec.Ingress = append(anp.Spec.Ingress, v1alpha1.AdminNetworkPolicyIngressRule{
				Name: fmt.Sprintf("allow-%d", i), Action: v1alpha1.AdminNetworkPolicyRuleActionAllow, From: from, Ports: adminPorts(r.Ports)})
		}
	}
	anp.Spec.Ingress = append(anp.Spec.Ingress, v1alpha1.AdminNetworkPolicyIngressRule{Name: "deny-other-pods",
		Action: v1alpha1.AdminNetworkPolicyRuleActionDeny, From: []v1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: allNamespaces}}})
	for i, r := range np.Spec.Egress {
		var to []v1alpha1.AdminNetworkPolicyEgressPeer
		for _, p := range r.To {
			switch nsSel, pods := adminPeer(ns, p); {
			case p.IPBlock != nil:
				to = append(to, v1alpha1.AdminNetworkPolicyEgressPeer{Networks: []v1alpha1.CIDR{v1alpha1.CIDR(p.IPBlock.CIDR)}})
			case pods == nil:
				to = append(to, v1alpha1.AdminNetworkPolicyEgressPeer{Namespaces: nsSel})
			default:
				to = append(to, v1alpha1.AdminNetworkPolicyEgressPeer{Pods: pods})
			}
		}
		anp.Spec.Egress = append(anp.Spec.Egress, v1alpha1.AdminNetworkPolicyEgressRule{
			Name: fmt.Sprintf("allow-%d", i), Action: v1alpha1.AdminNetworkPolicyRuleActionAllow, To: to, Ports: adminPorts(r.Ports)})
	}
	anp.Spec.Egress = append(anp.Spec.Egress, denyEgress("deny-other"))
	return anp
}

func denyEgress(name string) v1alpha1.AdminNetworkPolicyEgressRule {
	return v1alpha1.AdminNetworkPolicyEgressRule{Name: name, Action: v1alpha1.AdminNetworkPolicyRuleActionDeny,
		To: []v1alpha1.AdminNetworkPolicyEgressPeer{{Namespaces: allNamespaces}, {Networks: allNetworks}}}
}

// adminDefaultDeny isolates every Pod of namespace, after its workloads'
// own AdminNetworkPolicies (IsolateAll).
func adminDefaultDeny(namespace string, priority int32) *v1alpha1.AdminNetworkPolicy {
	return &v1alpha1.AdminNetworkPolicy{
		TypeMeta:   adminType,
		ObjectMeta: metav1.ObjectMeta{Name: policyName(namespace + "-default-deny")},
		Spec: v1alpha1.AdminNetworkPolicySpec{Priority: priority,
			Subject: v1alpha1.AdminNetworkPolicySubject{Namespaces: namespaceNamed(namespace)},
			Ingress: []v1alpha1.AdminNetworkPolicyIngressRule{{Name: "deny-pods", Action: v1alpha1.AdminNetworkPolicyRuleActionDeny,
				From: []v1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: allNamespaces}}}},
			Egress: []v1alpha1.AdminNetworkPolicyEgressRule{denyEgress("deny-all")},
		},
	}
}

func namespaceNamed(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: ns}}
}

// adminPeer is a NetworkPolicy peer's Namespaces (pods nil: every Pod of
// them) or Pods, with the policy's own Namespace made explicit.
func adminPeer(ns string, p networkingv1.NetworkPolicyPeer) (*metav1.LabelSelector, *v1alpha1.NamespacedPod) {
	nsSel := p.NamespaceSelector
	if nsSel == nil {
		nsSel = namespaceNamed(ns)
	}
	if p.PodSelector == nil {
		return nsSel, nil
	}
	return nsSel, &v1alpha1.NamespacedPod{NamespaceSelector: *nsSel, PodSelector: *p.PodSelector}
}

func adminPorts(ports []networkingv1.NetworkPolicyPort) *[]v1alpha1.AdminNetworkPolicyPort {
	if len(ports) == 0 {
		return nil
	}
	out := make([]v1alpha1.AdminNetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		out = append(out, v1alpha1.AdminNetworkPolicyPort{PortNumber: &v1alpha1.Port{Protocol: proto, Port: p.Port.IntVal}})
	}
	return &out
}
