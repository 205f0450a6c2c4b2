package flowcorrelationprocessor

import (
	"context"
	"net"
	"net/netip"

	"go.opentelemetry.io/collector/client"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// flowDirection is Antrea's proxy-mode flow direction, seen from the Node
// that reported the record: an inter-Node half is egress on the source's
// Node and ingress on the destination's; a to-external flow is egress from
// the cluster, a from-external one ingress into it; anything else (intra-Node
// flows, halves that cannot be told apart) is unknown. The reporter's Side
// decides when present; otherwise Antrea's Pod-name predicates, extended to
// Node endpoints (decision D1).
func flowDirection(r *flowrecord.Record) flowrecord.Direction {
	srcLocal := r.Source.PodName != "" || r.Source.Kind == flowrecord.EndpointNode
	dstLocal := r.Destination.PodName != "" || r.Destination.Kind == flowrecord.EndpointNode
	switch r.FlowType {
	case flowrecord.FlowTypeInterNode:
		switch r.Reporter.Side {
		case flowrecord.SideSource:
			return flowrecord.DirectionEgress
		case flowrecord.SideDestination:
			return flowrecord.DirectionIngress
		case flowrecord.SideBoth:
			return flowrecord.DirectionUnknown
		}
		if r.Source.PodName != "" && r.Destination.PodName == "" {
			return flowrecord.DirectionEgress
		}
		if r.Destination.PodName != "" && r.Source.PodName == "" {
			return flowrecord.DirectionIngress
		}
	case flowrecord.FlowTypeToExternal:
		if srcLocal {
			return flowrecord.DirectionEgress
		}
	case flowrecord.FlowTypeFromExternal:
		if dstLocal {
			return flowrecord.DirectionIngress
		}
	}
	return flowrecord.DirectionUnknown
}

// peerAddress is the address of the client that sent the data in ctx (the
// node collector), when the receiver recorded it: the "original exporter" of
// a proxied record that does not name one already.
func peerAddress(ctx context.Context) netip.Addr {
	switch a := client.FromContext(ctx).Addr.(type) {
	case nil:
		return netip.Addr{}
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().Unmap()
		}
		if ip, err := netip.ParseAddr(a.String()); err == nil {
			return ip.Unmap()
		}
		return netip.Addr{}
	}
}
