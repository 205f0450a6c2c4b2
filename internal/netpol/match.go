package netpol

// Whether a rule, a port or a peer matches a connection: in three values,
// since the answer may depend on what the caller does not know (maybe).

import (
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// tri is a three-valued match.
type tri uint8

const (
	no tri = iota
	yes
	maybe
)

func and(a, b tri) tri {
	if a == no || b == no {
		return no
	}
	if a == maybe || b == maybe {
		return maybe
	}
	return yes
}

func ruleMatches(c Cluster, conn *Connection, p *Policy, r *Rule, peer *Endpoint) tri {
	ports := anyOf(len(r.Ports), func(i int) tri { return portMatches(&r.Ports[i], conn) })
	if ports == no {
		return no
	}
	return and(ports, anyOf(len(r.Peers), func(i int) tri { return peerMatches(c, conn, p, &r.Peers[i], peer) }))
}

// anyOf is the match of a list of n alternatives: an empty list matches
// everything; else yes if one matches, maybe if one might.
func anyOf(n int, match func(int) tri) tri {
	if n == 0 {
		return yes
	}
	out := no
	for i := 0; i < n; i++ {
		switch match(i) {
		case yes:
			return yes
		case maybe:
			out = maybe
		}
	}
	return out
}

func portMatches(pt *Port, conn *Connection) tri {
	if pt.Protocol != conn.Protocol && (pt.Protocol != 0 || pt.Name == "") {
		return no
	}
	if pt.Name != "" {
		dst := &conn.Destination
		if dst.Kind != flowrecord.EndpointPod {
			return no
		}
		if !dst.PortsKnown {
			return maybe
		}
		for _, cp := range dst.Ports {
			if cp.Name == pt.Name && cp.Protocol == conn.Protocol && cp.Port == conn.Port {
				return yes
			}
		}
		return no
	}
	switch {
	case pt.Port == 0:
		return yes
	case pt.EndPort == 0:
		return boolTri(conn.Port == pt.Port)
	default:
		return boolTri(conn.Port >= pt.Port && conn.Port <= pt.EndPort)
	}
}

func peerMatches(c Cluster, conn *Connection, p *Policy, pe *Peer, peer *Endpoint) tri {
	if pe.Nodes != nil {
		if peer.Kind != flowrecord.EndpointNode {
			return no
		}
		if pe.Nodes.Empty() {
			return yes
		}
		return maybe // the Node's labels are not known here
	}
	if pe.Block != nil {
		a := peer.Address.Unmap()
		if !pe.Block.CIDR.Contains(a) {
			return no
		}
		for _, e := range pe.Block.Except {
			if e.Contains(a) {
				return no
			}
		}
		return yes
	}
	if peer.Kind != flowrecord.EndpointPod {
		return no // selectors select Pods only
	}
	ns := yes
	if pe.Namespaces == nil {
		if peer.Namespace == "" {
			return maybe
		}
		ns = boolTri(peer.Namespace == p.Namespace)
	} else if !pe.Namespaces.Empty() {
		if peer.Namespace == "" {
			return maybe
		}
		ns = namespaceSelected(c, conn, pe.Namespaces, peer.Namespace)
	}
	if ns == no {
		return no
	}
	return and(ns, podSelected(pe.Pods, peer))
}

func boolTri(b bool) tri {
	if b {
		return yes
	}
	return no
}
