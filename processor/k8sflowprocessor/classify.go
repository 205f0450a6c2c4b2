package k8sflowprocessor

import (
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// flowType follows from the two endpoints (decision D1): both in the cluster
// (Pod or Node) → intra-Node on the same Node, else inter-Node; cluster →
// external is to-external, external → cluster is from-external. A host
// process or hostNetwork Pod is its Node's node endpoint, so Node → Pod is
// intra- or inter-Node, never from-external (Antrea issue #8260).
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

// reportedSide decides which half of the connection this Node reports
// (decision D2), or SideUnknown when it has no local endpoint and must not
// report it.
//
//   - A local endpoint is a Pod on this Node or this Node itself.
//   - The ingress Node of a from-external flow (an external client whose
//     destination this Node DNATed: NodePort, LoadBalancer, externalIP) is
//     the flow's source side, even when the endpoint Pod is remote; when the
//     endpoint Pod is local too it reports both sides.
//   - A Node that DNATed a connection from another Node (a Pod or a host
//     process there called this Node's NodePort) is that connection's
//     destination: the Node itself is the pre-DNAT destination, even when the
//     endpoint Pod it chose runs elsewhere.
func reportedSide(r *flowrecord.Record, local string) flowrecord.Side {
	src, dst := &r.Source, &r.Destination
	srcLocal := src.Kind.InCluster() && src.NodeName == local
	dstLocal := dst.Kind.InCluster() && dst.NodeName == local
	ingress := src.Kind == flowrecord.EndpointExternal && dst.Kind.InCluster() && r.DNATed()
	switch {
	case (srcLocal || ingress) && dstLocal:
		return flowrecord.SideBoth
	case srcLocal || ingress:
		return flowrecord.SideSource
	case dstLocal || receivedFromNode(r, local):
		return flowrecord.SideDestination
	default:
		return flowrecord.SideUnknown
	}
}

// receivedFromNode reports whether this Node DNATed a connection whose
// source is on another Node: it arrived here addressed to one of this Node's
// front ends, so it crossed between two Nodes whatever the endpoints are.
func receivedFromNode(r *flowrecord.Record, local string) bool {
	return r.Source.Kind.InCluster() && r.Source.NodeName != local && r.DNATed()
}

// relayLeg returns the onward leg of a connection this Node reported as the
// destination it received from another Node but forwarded to an endpoint on
// a third Node (decision D3): keyed by the tuple it sent there (after its own
// SNAT), so that the gateway pairs it with the endpoint Node's half, which
// sees this Node as the client, and folds that half away. The connection
// itself is the destination half r, keyed by the tuple that reached this Node.
func relayLeg(r *flowrecord.Record) (flowrecord.Record, bool) {
	local := r.Reporter.NodeName
	if r.Reporter.Side != flowrecord.SideDestination || !receivedFromNode(r, local) ||
		!r.Destination.Kind.InCluster() || r.Destination.NodeName == local {
		return flowrecord.Record{}, false
	}
	relay := *r
	relay.Reporter.Side = flowrecord.SideRelay
	relay.Key = relay.CorrelationKey()
	return relay, true
}
