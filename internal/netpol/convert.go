package netpol

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FromAPI converts a NetworkPolicy. The API server validates selectors,
// CIDRs and ports; what still does not parse matches nothing.
func FromAPI(np *networkingv1.NetworkPolicy) *Policy {
	p := &Policy{
		Namespace: np.Namespace, Name: np.Name, UID: string(np.UID),
		PodSelector: selector(&np.Spec.PodSelector),
	}
	if len(np.Spec.PolicyTypes) == 0 {
		p.Ingress, p.Egress = true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			p.Ingress = true
		case networkingv1.PolicyTypeEgress:
			p.Egress = true
		}
	}
	for i, r := range np.Spec.Ingress {
		p.IngressRules = append(p.IngressRules, rule("ingress-"+strconv.Itoa(i), r.From, r.Ports))
	}
	for i, r := range np.Spec.Egress {
		p.EgressRules = append(p.EgressRules, rule("egress-"+strconv.Itoa(i), r.To, r.Ports))
	}
	return p
}

func rule(name string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) Rule {
	r := Rule{Name: name}
	for _, pe := range peers {
		var out Peer
		if pe.PodSelector != nil {
			out.Pods = selector(pe.PodSelector)
		}
		if pe.NamespaceSelector != nil {
			out.Namespaces = selector(pe.NamespaceSelector)
		}
		if b := pe.IPBlock; b != nil {
			out.Block = &IPBlock{CIDR: prefix(b.CIDR)}
			for _, e := range b.Except {
				out.Block.Except = append(out.Block.Except, prefix(e))
			}
		}
		if out.Pods == nil && out.Namespaces == nil && out.Block == nil {
			continue // an empty peer is invalid; the API server refuses it
		}
		r.Peers = append(r.Peers, out)
	}
	if len(peers) > 0 && len(r.Peers) == 0 {
		r.Peers = []Peer{{Block: &IPBlock{}}} // matches nothing
	}
	for _, pt := range ports {
		out := Port{Protocol: Protocol(pt.Protocol)}
		if pt.Port != nil {
			if pt.Port.Type == intstr.String {
				out.Name = pt.Port.StrVal
			} else {
				out.Port = uint16(pt.Port.IntVal)
			}
		}
		if pt.EndPort != nil && out.Port != 0 {
			out.EndPort = uint16(*pt.EndPort)
		}
		r.Ports = append(r.Ports, out)
	}
	return r
}

// Protocol maps a Kubernetes protocol to its IANA number; nil is TCP.
func Protocol(p *corev1.Protocol) uint8 {
	if p == nil {
		return ProtocolTCP
	}
	switch *p {
	case corev1.ProtocolUDP:
		return ProtocolUDP
	case corev1.ProtocolSCTP:
		return ProtocolSCTP
	}
	return ProtocolTCP
}

// ContainerPorts lists a Pod's named container ports.
func ContainerPorts(spec *corev1.PodSpec) []ContainerPort {
	var out []ContainerPort
	for _, c := range spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name != "" {
				proto := cp.Protocol
				out = append(out, ContainerPort{Name: cp.Name, Protocol: Protocol(&proto), Port: uint16(cp.ContainerPort)})
			}
		}
	}
	return out
}

func selector(s *metav1.LabelSelector) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

func prefix(s string) netip.Prefix {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{} // contains nothing
	}
	return p.Masked()
}
