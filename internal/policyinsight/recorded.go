package policyinsight

import (
	"encoding/json"
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
)

// Endpoint is one end of a recorded connection, as the flows table holds
// it. It is comparable: connections with equal ends share one evaluation.
type Endpoint struct {
	Kind    flowrecord.EndpointKind
	Address netip.Addr
	// Pod identity (Kind pod): Namespace, Pod, and its owner.
	Namespace, Pod, WorkloadKind, WorkloadName string
	// Node is the Node of a Pod, or the Node a node endpoint is.
	Node string
	// Labels is the Pod's labels as a JSON object, as recorded: "" when
	// they were not known.
	Labels string
}

// Workload names the endpoint for grouping: ns/Kind/name for a Pod with an
// owner, ns/Pod/name for one without, node/name, or external/address.
func (e *Endpoint) Workload() string {
	switch {
	case e.Kind == flowrecord.EndpointPod && e.WorkloadName != "":
		return e.Namespace + "/" + e.WorkloadKind + "/" + e.WorkloadName
	case e.Kind == flowrecord.EndpointPod:
		return e.Namespace + "/Pod/" + e.Pod
	case e.Kind == flowrecord.EndpointNode && e.Node != "":
		return "node/" + e.Node
	}
	return "external/" + e.Address.String()
}

// Flow is the recorded connections between two ends on one protocol and
// destination port.
type Flow struct {
	Source, Destination *Endpoint
	Protocol            uint8
	// Port is the destination Pod's port (after DNAT): what policies match.
	Port uint16
	// Connections counts them; First and Last are the earliest start and
	// the latest end.
	Connections uint64
	First, Last time.Time

	src, dst netpol.Endpoint // the evaluator's view, filled once
}

// flowKey is a flow's identity, its ends interned first: hashing two
// pointers, not two Endpoints' strings, when the map of flows grows
// (BenchmarkWhatIf).
type flowKey struct {
	src, dst *interned
	proto    uint8
	port     uint16
}

// Recording aggregates recorded connections into Flows. The zero value is
// empty and ready.
type Recording struct {
	flows     map[flowKey]*Flow
	endpoints map[Endpoint]*interned
	order     []*Flow
}

// interned is an endpoint shared by its flows, with the evaluator's view of
// it (its labels parsed once).
type interned struct {
	e  Endpoint
	np netpol.Endpoint
}

// Add counts n connections from src to dst (protocol, destination port)
// that started at start and ended at end.
func (r *Recording) Add(src, dst Endpoint, protocol uint8, port uint16, n uint64, start, end time.Time) {
	if r.flows == nil {
		r.flows, r.endpoints = map[flowKey]*Flow{}, map[Endpoint]*interned{}
	}
	s, d := r.intern(src), r.intern(dst)
	k := flowKey{s, d, protocol, port}
	f := r.flows[k]
	if f == nil {
		f = &Flow{Source: &s.e, Destination: &d.e, Protocol: protocol, Port: port, First: start, Last: end, src: s.np, dst: d.np}
		r.flows[k] = f
		r.order = append(r.order, f)
	}
	f.Connections += n
	if start.Before(f.First) {
		f.First = start
	}
	if end.After(f.Last) {
		f.Last = end
	}
}

func (r *Recording) intern(e Endpoint) *interned {
	if p := r.endpoints[e]; p != nil {
		return p
	}
	p := &interned{e: e}
	p.np = toNetpol(&p.e)
	r.endpoints[e] = p
	return p
}

// Flows lists the flows in the order they were first added.
func (r *Recording) Flows() []*Flow { return r.order }

// Connections is the number of connections added.
func (r *Recording) Connections() uint64 {
	var n uint64
	for _, f := range r.order {
		n += f.Connections
	}
	return n
}

// toNetpol is the evaluator's endpoint. Container ports are not recorded:
// a named port in a rule leaves the verdict Undetermined.
func toNetpol(e *Endpoint) netpol.Endpoint {
	out := netpol.Endpoint{Address: e.Address, Kind: e.Kind, Namespace: e.Namespace}
	if e.Kind == flowrecord.EndpointPod && e.Labels != "" {
		l := map[string]string{}
		if json.Unmarshal([]byte(e.Labels), &l) == nil {
			out.Labels = l
		}
	}
	return out
}

// LabelsOf parses a recorded labels column; nil when not known.
func LabelsOf(e *Endpoint) map[string]string {
	return toNetpol(e).Labels
}

func (f *Flow) connection() *netpol.Connection {
	return &netpol.Connection{Protocol: f.Protocol, Source: f.src, Destination: f.dst, Port: f.Port, Start: f.First}
}
