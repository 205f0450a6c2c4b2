package k8sflowprocessor

import (
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// flowType follows from the two endpoints (DESIGN D1): both in the cluster
// (Pod or Node) → intra-Node on the same Node, else inter-Node; cluster →
// external is to-external, external → cluster is from-external. A host
// process or hostNetwork Pod is its Node's node endpoint, so Node → Pod is
// intra- or inter-Node, never from-external (seed 000).
func flowType(src, dst *flowrecord.Endpoint) flowrecord.FlowType {
	switch s, d := src.Kind.InCluster(), dst.Kind.InCluster(); {
	case s && d:
		if src.NodeName == dst.NodeName {
			return flowrecord.FlowTypeIntraNode
		}
		return flowrecord.FlowTypeInterNode
	case s:
		return flowrecord.FlowTypeToExternal
	case d:
		return flowrecord.FlowTypeFromExternal
	default:
		return flowrecord.FlowTypeUnspecified
	}
}

// dnatted reports whether this Node's conntrack rewrote the destination
// (a Service front end was translated to an endpoint here).
func dnatted(r *flowrecord.Record) bool {
	o := r.OriginalDestinationAddress
	return o.IsValid() && (o.Unmap() != r.Destination.Address.Unmap() || r.OriginalDestinationPort != r.Destination.Port)
}

// reportedSide decides which half of the connection this Node reports
// (DESIGN D2), or SideUnknown when it has no local endpoint and must not
// report it.
//
//   - A local endpoint is a Pod on this Node or this Node itself.
//   - The ingress Node of a from-external flow (an external client whose
//     destination this Node DNATed: NodePort, LoadBalancer, externalIP) is
//     the flow's source side, even when the endpoint Pod is remote; when the
//     endpoint Pod is local too it reports both sides.
func reportedSide(r *flowrecord.Record, local string) flowrecord.Side {
	src, dst := &r.Source, &r.Destination
	srcLocal := src.Kind.InCluster() && src.NodeName == local
	dstLocal := dst.Kind.InCluster() && dst.NodeName == local
	ingress := src.Kind == flowrecord.EndpointExternal && dst.Kind.InCluster() && dnatted(r)
	switch {
	case (srcLocal || ingress) && dstLocal:
		return flowrecord.SideBoth
	case srcLocal || ingress:
		return flowrecord.SideSource
	case dstLocal:
		return flowrecord.SideDestination
	default:
		return flowrecord.SideUnknown
	}
}
