package netpol

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// FromAdmin converts an AdminNetworkPolicy.
func FromAdmin(anp *v1alpha1.AdminNetworkPolicy) *Policy {
	p := clusterPolicy(flowrecord.PolicyTypeAdminNetworkPolicy, anp.Name, string(anp.UID), &anp.Spec.Subject)
	p.Priority = anp.Spec.Priority
	for _, r := range anp.Spec.Ingress {
		p.IngressRules = append(p.IngressRules, clusterRule(r.Name, adminAction(r.Action), ingressPeers(r.From), r.Ports))
	}
	for _, r := range anp.Spec.Egress {
		p.EgressRules = append(p.EgressRules, clusterRule(r.Name, adminAction(r.Action), egressPeers(r.To), r.Ports))
	}
	return p
}

// FromBaseline converts a BaselineAdminNetworkPolicy.
func FromBaseline(banp *v1alpha1.BaselineAdminNetworkPolicy) *Policy {
	p := clusterPolicy(flowrecord.PolicyTypeBaselineAdminNetworkPolicy, banp.Name, string(banp.UID), &banp.Spec.Subject)
	for _, r := range banp.Spec.Ingress {
		p.IngressRules = append(p.IngressRules, clusterRule(r.Name, baselineAction(r.Action), ingressPeers(r.From), r.Ports))
	}
	for _, r := range banp.Spec.Egress {
		p.EgressRules = append(p.EgressRules, clusterRule(r.Name, baselineAction(r.Action), egressPeers(r.To), r.Ports))
	}
	return p
}

func clusterPolicy(typ flowrecord.PolicyType, name, uid string, s *v1alpha1.AdminNetworkPolicySubject) *Policy {
	p := &Policy{Type: typ, Name: name, UID: uid, NamespaceSelector: labels.Nothing()}
	switch {
	case s.Namespaces != nil:
		p.NamespaceSelector = selector(s.Namespaces)
	case s.Pods != nil:
		p.NamespaceSelector, p.PodSelector = selector(&s.Pods.NamespaceSelector), selector(&s.Pods.PodSelector)
	}
	return p
}

func adminAction(a v1alpha1.AdminNetworkPolicyRuleAction) Action {
	switch a {
	case v1alpha1.AdminNetworkPolicyRuleActionAllow:
		return ActionAllow
	case v1alpha1.AdminNetworkPolicyRuleActionPass:
		return ActionPass
	}
	return ActionDeny
}

func baselineAction(a v1alpha1.BaselineAdminNetworkPolicyRuleAction) Action {
	if a == v1alpha1.BaselineAdminNetworkPolicyRuleActionAllow {
		return ActionAllow
	}
	return ActionDeny
}

func ingressPeers(from []v1alpha1.AdminNetworkPolicyIngressPeer) []Peer {
	var peers []Peer
	for _, pe := range from {
		peers = appendPeer(peers, pe.Namespaces, pe.Pods, nil, nil)
	}
	return peers
}

// egressPeers converts an egress rule's peers. ANP and BANP egress peers
// have the same fields but are two types (the ANP's also has domainNames,
// which match no address, as a peer with none of these set).
func egressPeers[P v1alpha1.AdminNetworkPolicyEgressPeer | v1alpha1.BaselineAdminNetworkPolicyEgressPeer](to []P) []Peer {
	var peers []Peer
	for _, p := range to {
		switch pe := any(p).(type) {
		case v1alpha1.AdminNetworkPolicyEgressPeer:
			peers = appendPeer(peers, pe.Namespaces, pe.Pods, pe.Nodes, pe.Networks)
		case v1alpha1.BaselineAdminNetworkPolicyEgressPeer:
			peers = appendPeer(peers, pe.Namespaces, pe.Pods, pe.Nodes, pe.Networks)
		}
	}
	return peers
}

// nothing is a peer that matches no address (a domainNames peer, or one
// the API server should have refused).
var nothing = Peer{Block: &IPBlock{}}

// appendPeer converts one peer (exactly one of its fields is set: the API
// server validates it); networks become one peer per CIDR.
func appendPeer(peers []Peer, namespaces *metav1.LabelSelector, pods *v1alpha1.NamespacedPod, nodes *metav1.LabelSelector, networks []v1alpha1.CIDR) []Peer {
	switch {
	case namespaces != nil:
		return append(peers, Peer{Namespaces: selector(namespaces)})
	case pods != nil:
		return append(peers, Peer{Namespaces: selector(&pods.NamespaceSelector), Pods: selector(&pods.PodSelector)})
	case nodes != nil:
		return append(peers, Peer{Nodes: selector(nodes)})
	case len(networks) > 0:
		for _, n := range networks {
			peers = append(peers, Peer{Block: &IPBlock{CIDR: prefix(string(n))}})
		}
		return peers
	}
	return append(peers, nothing)
}

// clusterRule builds a rule; ports nil or empty is every port.
func clusterRule(name string, action Action, peers []Peer, ports *[]v1alpha1.AdminNetworkPolicyPort) Rule {
	if len(peers) == 0 {
		peers = []Peer{nothing} // from/to is required; none matches nothing
	}
	r := Rule{Name: name, Action: action, Peers: peers}
	if ports == nil {
		return r
	}
	for _, pt := range *ports {
		switch {
		case pt.PortNumber != nil:
			r.Ports = append(r.Ports, Port{Protocol: protocolOf(pt.PortNumber.Protocol), Port: uint16(pt.PortNumber.Port)})
		case pt.PortRange != nil:
			r.Ports = append(r.Ports, Port{Protocol: protocolOf(pt.PortRange.Protocol),
				Port: uint16(pt.PortRange.Start), EndPort: uint16(pt.PortRange.End)})
		case pt.NamedPort != nil:
			r.Ports = append(r.Ports, Port{Name: *pt.NamedPort})
		}
	}
	return r
}

func protocolOf(p corev1.Protocol) uint8 {
	if p == "" {
		return ProtocolTCP
	}
	return Protocol(&p)
}
