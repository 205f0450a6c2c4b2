package aggregate

import "github.com/flowtel/flowtel/internal/flowrecord"

// half is the part of a connection one record reports.
type half uint8

const (
	halfUnknown     half = iota // neither rule below could tell; Antrea counts it as the destination's
	halfSource                  // the source endpoint's Node (or the ingress Node of a from-external flow)
	halfDestination             // the destination endpoint's Node
	halfBoth                    // both endpoints are local to the reporter
	halfRelay                   // the onward leg a NodePort's Node sent to a third Node: a source half, folded away
)

// halfOf says which half r reports. The reporter's own word (Reporter.Side)
// decides when present. Without it, the reporting Node's name, when it names
// exactly one endpoint's Node, is unambiguous even for Node endpoints (decision
// D1), where Antrea's Pod-name predicates would read a host-network source's
// half as the destination's. Antrea's predicates are the last resort.
func halfOf(r *flowrecord.Record) half {
	switch r.Reporter.Side {
	case flowrecord.SideSource:
		return halfSource
	case flowrecord.SideDestination:
		return halfDestination
	case flowrecord.SideBoth:
		return halfBoth
	case flowrecord.SideRelay:
		return halfRelay
	}
	if r.IsIngressNodeFromExternal() {
		return halfSource
	}
	if n := r.Reporter.NodeName; n != "" {
		src, dst := r.Source.NodeName == n, r.Destination.NodeName == n
		switch {
		case src && dst:
			return halfBoth
		case src:
			return halfSource
		case dst:
			return halfDestination
		}
	}
	srcPod, dstPod := r.Source.PodName != "", r.Destination.PodName != ""
	switch {
	case srcPod && !dstPod:
		return halfSource
	case dstPod && !srcPod:
		return halfDestination
	}
	return halfUnknown
}

// sameHalf is Antrea's areRecordsFromSameNode: both from the source Node or
// both from the destination Node. An unknown half is never "the same", so it
// pairs with whatever is stored, as in Antrea.
func sameHalf(a, b half) bool {
	return (isSource(a) && isSource(b)) || (a == halfDestination && b == halfDestination)
}

// isSource: a relay leg is the source half of its leg.
func isSource(h half) bool { return h == halfSource || h == halfRelay }

// correlationRequired says whether a connection has two halves to pair.
// Denied connections never produce a second half: the source Node drops or
// rejects on egress, or the destination Node rejects on ingress (an ingress
// Drop still leaves a committed connection on the source Node, so it pairs).
// Otherwise inter-Node flows (also those whose source is a Node, decision D1)
// and the ingress Node's half of an SNATed from-external flow need a peer;
// intra-Node and to-external flows, and records that see both ends, do not.
func correlationRequired(r *flowrecord.Record, h half) bool {
	if h == halfBoth {
		return false
	}
	switch r.EgressPolicy.RuleAction {
	case flowrecord.RuleActionDrop, flowrecord.RuleActionReject:
		return false
	}
	if r.IngressPolicy.RuleAction == flowrecord.RuleActionReject {
		return false
	}
	return r.FlowType == flowrecord.FlowTypeInterNode || r.IsIngressNodeFromExternal()
}
