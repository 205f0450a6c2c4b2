package netlab

import (
	"context"
	"fmt"
	"net/netip"
)

// Service is a Kubernetes Service as kube-proxy's iptables mode realises it on
// every Node: DNAT of the ClusterIP (from Pods and from the host) and of the
// NodePort on every Node's transport address to an endpoint Pod.
type Service struct {
	Namespace   string
	Name        string
	Protocol    string // tcp or udp
	ClusterIPv4 netip.Addr
	ClusterIPv6 netip.Addr
	Port        uint16
	TargetPort  uint16
	NodePort    uint16 // 0: no NodePort
	// ExternalTrafficPolicyLocal sends NodePort traffic only to endpoints on the
	// receiving Node and keeps the client address; Cluster (false) may forward to
	// another Node and masquerades the client.
	ExternalTrafficPolicyLocal bool
	// MasqueradeHost SNATs host-originated ClusterIP traffic to the Node's gateway
	// address with a fresh source port, as AntreaProxy does (Antrea issue #8260, case 3).
	MasqueradeHost bool
	Endpoints      []*Pod
}

// masqMark is kube-proxy's KUBE-MARK-MASQ bit.
const masqMark = "0x4000/0x4000"

// AddService installs the Service's NAT rules on every Node.
func (l *Lab) AddService(ctx context.Context, svc *Service) error {
	if len(svc.Endpoints) == 0 {
		return fmt.Errorf("netlab: service %s/%s has no endpoints", svc.Namespace, svc.Name)
	}
	if svc.Protocol != "tcp" && svc.Protocol != "udp" {
		return fmt.Errorf("netlab: service %s/%s: protocol %q, want tcp or udp", svc.Namespace, svc.Name, svc.Protocol)
	}
	for _, node := range l.Nodes {
		for _, fam := range []family{v4, v6} {
			if err := l.in(ctx, node.NS, svc.rules(node, fam)...); err != nil {
				return err
			}
		}
	}
	return nil
}

type family struct {
	tool      string // iptables or ip6tables
	clusterIP func(*Service) netip.Addr
	transport func(*Node) netip.Addr
	gateway   func(*Node) netip.Addr
	pod       func(*Pod) netip.Addr
}

var (
	v4 = family{"iptables", func(s *Service) netip.Addr { return s.ClusterIPv4 }, func(n *Node) netip.Addr { return n.TransportV4 },
		func(n *Node) netip.Addr { return n.GatewayV4 }, func(p *Pod) netip.Addr { return p.IPv4 }}
	v6 = family{"ip6tables", func(s *Service) netip.Addr { return s.ClusterIPv6 }, func(n *Node) netip.Addr { return n.TransportV6 },
		func(n *Node) netip.Addr { return n.GatewayV6 }, func(p *Pod) netip.Addr { return p.IPv6 }}
)

// rules returns the iptables commands of one address family on one Node.
func (s *Service) rules(node *Node, f family) []string {
	var cmds []string
	nat := f.tool + " -w -t nat -A "
	match := fmt.Sprintf("-p %s --dport %d", s.Protocol, s.Port)

	cmds = append(cmds, dnatRules(nat, "PREROUTING", f.clusterIP(s), match, f, s.Endpoints, s.TargetPort)...)
	if s.MasqueradeHost {
		cmds = append(cmds, fmt.Sprintf("%sOUTPUT -d %s %s -j MARK --set-xmark %s", nat, f.clusterIP(s), match, masqMark))
		cmds = append(cmds, fmt.Sprintf("%sPOSTROUTING -m mark --mark %s -s %s -j SNAT --to-source %s --random-fully",
			nat, masqMark, f.gateway(node), f.gateway(node)))
	}
	cmds = append(cmds, dnatRules(nat, "OUTPUT", f.clusterIP(s), match, f, s.Endpoints, s.TargetPort)...)

	if s.NodePort != 0 {
		npMatch := fmt.Sprintf("-p %s --dport %d", s.Protocol, s.NodePort)
		endpoints := s.Endpoints
		if s.ExternalTrafficPolicyLocal {
			endpoints = nil
			for _, p := range s.Endpoints {
				if p.Node == node {
					endpoints = append(endpoints, p)
				}
			}
		} else {
			cmds = append(cmds,
				fmt.Sprintf("%sPREROUTING -d %s %s -j MARK --set-xmark %s", nat, f.transport(node), npMatch, masqMark),
				fmt.Sprintf("%sPOSTROUTING -m mark --mark %s -j MASQUERADE", nat, masqMark))
		}
		if len(endpoints) > 0 {
			cmds = append(cmds, dnatRules(nat, "PREROUTING", f.transport(node), npMatch, f, endpoints, s.TargetPort)...)
		}
	}
	return cmds
}

// dnatRules spreads new connections over the endpoints (nth-packet statistic, as
// kube-proxy's probability rules but deterministic).
func dnatRules(nat, chain string, dst netip.Addr, match string, f family, endpoints []*Pod, port uint16) []string {
	var cmds []string
	for i, ep := range endpoints {
		spread := ""
		if remaining := len(endpoints) - i; remaining > 1 {
			spread = fmt.Sprintf(" -m statistic --mode nth --every %d --packet 0", remaining)
		}
		cmds = append(cmds, fmt.Sprintf("%s%s -d %s %s%s -j DNAT --to-destination %s",
			nat, chain, dst, match, spread, netip.AddrPortFrom(f.pod(ep), port)))
	}
	return cmds
}
