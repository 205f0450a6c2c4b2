package policyinsight

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/netpol"
)

// Result is a connection's verdict over both directions.
type Result uint8

const (
	// Admitted: neither direction denies it (each is allowed by a rule or
	// has no policy).
	Admitted Result = iota
	// Denied: a direction denies it.
	Denied
	// Undetermined: no direction denies it, but one might on what the
	// records do not hold (a named port, a peer's unknown labels).
	Undetermined
)

var resultNames = [...]string{"admitted", "denied", "undetermined"}

func (r Result) String() string { return resultNames[r] }

// MarshalText writes the name.
func (r Result) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Decision is a connection's verdict per direction and over both.
type Decision struct {
	Result          Result
	Ingress, Egress netpol.Verdict
}

// Decide evaluates a connection in both directions.
func Decide(c netpol.Cluster, conn *netpol.Connection) Decision {
	in, eg := c, c
	if s, ok := c.(*staticCluster); ok {
		in, eg = s.forSubject(conn.Destination.Namespace), s.forSubject(conn.Source.Namespace)
	}
	d := Decision{Ingress: netpol.Evaluate(in, conn, true), Egress: netpol.Evaluate(eg, conn, false)}
	switch in, eg := d.Ingress.Outcome, d.Egress.Outcome; {
	case in == netpol.Denied || eg == netpol.Denied:
		d.Result = Denied
	case in == netpol.Undetermined || eg == netpol.Undetermined:
		d.Result = Undetermined
	}
	return d
}

// Rule names what decides one direction: a policy's rule, or a policy
// that isolates the Pod with no rule admitting the connection (Rule
// empty), or nothing (Kind empty: no policy selects that side).
type Rule struct {
	Direction string `json:"direction"` // ingress or egress
	Outcome   string `json:"outcome"`   // the direction's verdict: allowed, denied, unisolated, undetermined
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Policy    string `json:"policy,omitempty"`
	Rule      string `json:"rule,omitempty"`
}

func ruleOf(direction string, v netpol.Verdict) Rule {
	r := Rule{Direction: direction, Outcome: v.Outcome.String()}
	if p := v.Policy; p != nil {
		r.Kind, r.Namespace, r.Policy, r.Rule = kindOf(p.Type), p.Namespace, p.Name, v.RuleName
	}
	return r
}

func kindOf(t flowrecord.PolicyType) string {
	switch t {
	case flowrecord.PolicyTypeAdminNetworkPolicy:
		return KindAdminNetworkPolicy
	case flowrecord.PolicyTypeBaselineAdminNetworkPolicy:
		return KindBaselineAdminNetworkPolicy
	}
	return KindNetworkPolicy
}

// deciding lists the directions that make the draft's result what it is:
// for a denial the denying ones, for an admission the ones that no longer
// deny (or no longer leave it undetermined), for an undetermined result
// the undetermined ones.
func deciding(before, after Decision) []Rule {
	type side struct {
		name          string
		before, after netpol.Verdict
	}
	var out []Rule
	for _, s := range []side{{"ingress", before.Ingress, after.Ingress}, {"egress", before.Egress, after.Egress}} {
		var keep bool
		switch after.Result {
		case Denied:
			keep = s.after.Outcome == netpol.Denied
		case Undetermined:
			keep = s.after.Outcome == netpol.Undetermined
		default:
			keep = s.before.Outcome == netpol.Denied || s.before.Outcome == netpol.Undetermined
		}
		if keep {
			out = append(out, ruleOf(s.name, s.after))
		}
	}
	return out
}

// Change is recorded connections of one workload pair, protocol and port
// whose result the draft changes from Before to After, and the rules that
// decide After.
type Change struct {
	Source      string    `json:"source"`
	Destination string    `json:"destination"`
	Protocol    string    `json:"protocol"`
	Port        uint16    `json:"port"`
	Before      Result    `json:"before"`
	After       Result    `json:"after"`
	Connections uint64    `json:"connections"`
	Rules       []Rule    `json:"rules"`
	First       time.Time `json:"first"`
	Last        time.Time `json:"last"`
}

// Report is a what-if's answer.
type Report struct {
	// Connections and Flows are what was evaluated: recorded connections,
	// and the distinct (ends, protocol, port) they fall into.
	Connections uint64 `json:"connections"`
	Flows       int    `json:"flows"`
	// Changes, newly denied first, then by source, destination, protocol
	// and port.
	Changes []Change `json:"changes"`
}

// NewlyDenied counts the connections the draft would deny that the
// cluster's policies admit (or leave undetermined).
func (r *Report) NewlyDenied() uint64 {
	var n uint64
	for _, c := range r.Changes {
		if c.After == Denied {
			n += c.Connections
		}
	}
	return n
}

// MarshalJSON adds the newly denied count.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		*plain
		NewlyDenied uint64 `json:"newlyDenied"`
	}{(*plain)(r), r.NewlyDenied()})
}

// WhatIf evaluates flows against the snapshot and against the snapshot
// with the draft applied, and reports the changed results. A direction
// whose subject Pod no policy of the draft can select (a NetworkPolicy
// draft in another Namespace, and no cluster-scoped policy in it) keeps
// its verdict and is not evaluated again.
func WhatIf(cluster *Snapshot, draft *Draft, flows []*Flow) (*Report, error) {
	e, err := NewEvaluator(cluster, draft)
	if err != nil {
		return nil, err
	}
	return e.Compare(flows), nil
}

// Evaluator holds a cluster before and after a draft, for comparing flows
// as they come (a live stream) without applying the draft again.
type Evaluator struct {
	before, after netpol.Cluster
	scope         scope
}

// NewEvaluator applies the draft to the cluster (Draft.Apply's errors).
func NewEvaluator(cluster *Snapshot, draft *Draft) (*Evaluator, error) {
	after, err := draft.Apply(cluster)
	if err != nil {
		return nil, err
	}
	return &Evaluator{before: cluster.Cluster(), after: after.Cluster(), scope: draft.scope()}, nil
}

type changeKey struct {
	src, dst      string
	proto         uint8
	port          uint16
	before, after Result
}

// Compare reports the flows whose result the draft changes.
func (e *Evaluator) Compare(flows []*Flow) *Report {
	before, after, sc := e.before, e.after, e.scope
	rep := &Report{Flows: len(flows)}
	groups := map[changeKey]*Change{}
	for _, f := range flows {
		rep.Connections += f.Connections
		if !touched(sc, f) {
			continue
		}
		conn := f.connection()
		b, a := Decide(before, conn), Decide(after, conn)
		if a.Result == b.Result {
			continue
		}
		k := changeKey{f.Source.Workload(), f.Destination.Workload(), f.Protocol, f.Port, b.Result, a.Result}
		c := groups[k]
		if c == nil {
			c = &Change{Source: k.src, Destination: k.dst, Protocol: protocolName(f.Protocol), Port: f.Port,
				Before: b.Result, After: a.Result, First: f.First, Last: f.Last}
			groups[k] = c
		}
		c.Connections += f.Connections
		c.First, c.Last = minTime(c.First, f.First), maxTime(c.Last, f.Last)
		for _, r := range deciding(b, a) {
			if !slices.Contains(c.Rules, r) {
				c.Rules = append(c.Rules, r)
			}
		}
	}
	for _, c := range groups {
		rep.Changes = append(rep.Changes, *c)
	}
	slices.SortFunc(rep.Changes, func(x, y Change) int {
		return cmp.Or(-cmp.Compare(boolInt(x.After == Denied), boolInt(y.After == Denied)),
			cmp.Compare(x.Source, y.Source), cmp.Compare(x.Destination, y.Destination),
			cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.Port, y.Port),
			cmp.Compare(x.Before, y.Before), cmp.Compare(x.After, y.After))
	})
	return rep
}

// touched reports whether the draft can change either direction's verdict.
func touched(sc scope, f *Flow) bool {
	return (f.Destination.Kind == flowrecord.EndpointPod && sc.touches(f.Destination.Namespace)) ||
		(f.Source.Kind == flowrecord.EndpointPod && sc.touches(f.Source.Namespace))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// protocolName names the protocols policies match; others by number.
func protocolName(p uint8) string {
	switch p {
	case netpol.ProtocolTCP:
		return "TCP"
	case netpol.ProtocolUDP:
		return "UDP"
	case netpol.ProtocolSCTP:
		return "SCTP"
	}
	return "proto-" + strconv.Itoa(int(p))
}
