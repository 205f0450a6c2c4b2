package flowstreamexporter

import "github.com/flowtel/flowtel/internal/flowrecord"

// tier is how much of one endpoint a stream may see; the values are the
// wire's EndpointDisclosure (Full is the zero value: nothing withheld).
type tier uint8

const (
	// tierFull: the endpoint is in the stream's scope, or the client may
	// observe flows in its Namespace with the stream's verb.
	tierFull tier = 0
	// tierIdentity: the client holds flows/identity in the endpoint's
	// Namespace: Pod, policy and Service identity, but no Node or Egress.
	tierIdentity tier = 1
	// tierFlow: addresses, ports, counters, times, flow type, policy type
	// and action only.
	tierFlow tier = 2
)

// denied reports whether a policy rule explicitly dropped or rejected the
// connection (anything else, "no policy" included, counts as allowed).
func denied(r *flowrecord.Record) bool {
	for _, a := range []flowrecord.RuleAction{r.IngressPolicy.RuleAction, r.EgressPolicy.RuleAction} {
		if a == flowrecord.RuleActionDrop || a == flowrecord.RuleActionReject {
			return true
		}
	}
	return false
}

// redact returns a copy of r with what the tiers withhold cleared. Labels
// maps are shared with r, never modified.
func redact(r *flowrecord.Record, src, dst tier) *flowrecord.Record {
	c := *r
	deny := denied(r)
	if src >= tierIdentity {
		c.Source.NodeName, c.Source.NodeUID = "", ""
		c.Egress = flowrecord.Egress{}
	}
	if src >= tierFlow {
		withholdIdentity(&c.Source, deny)
		c.EgressPolicy = flowrecord.Policy{Type: r.EgressPolicy.Type, RuleAction: r.EgressPolicy.RuleAction}
	}
	if dst >= tierIdentity {
		c.Destination.NodeName, c.Destination.NodeUID = "", ""
	}
	if dst >= tierFlow {
		withholdIdentity(&c.Destination, deny)
		c.IngressPolicy = flowrecord.Policy{Type: r.IngressPolicy.Type, RuleAction: r.IngressPolicy.RuleAction}
		// The Service fields follow the destination endpoint's tier; the
		// pre-DNAT destination is the Service's address or a Node's.
		c.Service = flowrecord.Service{}
		c.OriginalDestinationAddress, c.OriginalDestinationPort = c.Destination.Address, c.Destination.Port
	}
	if src != tierFull || dst != tierFull {
		// Record-level fields naming a Node: the reporting Node and the
		// IPFIX origin. proxy_snat_* stays (see README).
		c.Reporter.NodeName = ""
		c.Origin = flowrecord.Origin{}
	}
	return &c
}

// withholdIdentity clears an endpoint's Pod identity; its Namespace too when
// the connection was denied, so that a client cannot map addresses to
// Namespaces by reading back its own denied probes.
func withholdIdentity(e *flowrecord.Endpoint, deny bool) {
	e.PodName, e.PodUID, e.PodLabels = "", "", nil
	e.WorkloadKind, e.WorkloadName = "", ""
	if deny {
		e.Namespace = ""
	}
}
