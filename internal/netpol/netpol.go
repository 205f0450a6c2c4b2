// Package netpol evaluates Kubernetes NetworkPolicies (networking.k8s.io/v1),
// and AdminNetworkPolicies and BaselineAdminNetworkPolicies
// (policy.networking.k8s.io/v1alpha1) where the cluster serves them, for one
// connection, as they stood when it started (decision D12): which policies
// isolate the destination Pod for ingress and the source Pod for egress, and
// which of their rules admits (or denies) the connection.
//
// The package holds no state of its own: a Cluster (internal/k8sindex, with
// its bounded history) answers which policies and Namespace labels applied at
// a time, and the caller describes the two endpoints as it resolved them.
//
// Semantics, per direction:
//   - A Pod is isolated for ingress (egress) when a policy in its Namespace
//     selects it and lists that policy type; policyTypes left out means
//     Ingress, plus Egress when the policy has egress rules.
//   - Node endpoints (host network) and external addresses are never
//     selected: that side has no policy.
//   - A connection is admitted when any rule of any isolating policy admits
//     it: its peers (none = every peer) and its ports (none = every port and
//     protocol) both match. A peer is a podSelector (Pods of the policy's
//     Namespace), a namespaceSelector (Pods of matching Namespaces), both
//     (matching Pods of matching Namespaces), or an ipBlock (the address is
//     in the CIDR and in none of its excepts; Pods, Nodes and external
//     addresses alike). A port is a protocol (default TCP) with a number, a
//     range (port..endPort), a name (resolved against the destination Pod's
//     container ports of that protocol) or nothing (every port).
//   - Several admitting policies: the first by name is named, and in it the
//     first admitting rule. NetworkPolicies are additive allow lists with no
//     precedence, so each one alone would admit the connection; a fixed
//     order makes every export of a connection, from either Node, name the
//     same policy. An isolated side no rule admits is denied and names the
//     first isolating policy by name, with no rule.
//   - Rules are named by direction and their index in the policy's list:
//     "ingress-0" is spec.ingress[0], "egress-2" spec.egress[2]. Kubernetes
//     rules have no names; the index is stable while the policy is not
//     edited and says which rule to read.
//
// Precedence, per direction (the network-policy-api's):
//  1. AdminNetworkPolicies that select the Pod (subject: its Namespace's
//     labels, and its own labels for a pods subject), lowest priority
//     number first (equal priorities: by name), their rules in order: the
//     first rule that matches decides. Allow admits, Deny denies, both
//     naming that rule by its own name; Pass skips every remaining
//     AdminNetworkPolicy.
//  2. NetworkPolicies, as above, when no AdminNetworkPolicy decided: an
//     isolated Pod is admitted or denied here.
//  3. BaselineAdminNetworkPolicies (the cluster's "default"), when no
//     NetworkPolicy isolates the Pod: the first matching rule, Allow or Deny.
//
// Cluster-scoped policies have no Namespace. Their peers are namespaces
// (every Pod of the matching Namespaces), pods (matching Pods of matching
// Namespaces), networks (CIDRs, any address) and nodes (Node endpoints; the
// Nodes' labels are not known here, so a nodes peer that might match makes
// the verdict Undetermined); domainNames peers match nothing (the
// connection's address says nothing about a name). Ports are portNumber,
// portRange and namedPort (a container port's name, any protocol).
//
// When the answer depends on what the caller does not know (a peer Pod's
// labels, the destination Pod's container ports for a named port) and no
// rule admits the connection on what is known, the verdict is Undetermined.
package netpol

import (
	"cmp"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// IANA protocol numbers NetworkPolicy ports name.
const (
	ProtocolTCP  uint8 = 6
	ProtocolUDP  uint8 = 17
	ProtocolSCTP uint8 = 132
)

// Policy is a NetworkPolicy, AdminNetworkPolicy or
// BaselineAdminNetworkPolicy in the form evaluation needs.
type Policy struct {
	Namespace, Name, UID string
	// Type is the records' policy type; zero is PolicyTypeK8sNetworkPolicy.
	Type flowrecord.PolicyType
	// Priority orders AdminNetworkPolicies, lowest first.
	Priority int32
	// NamespaceSelector, for a cluster-scoped policy, selects the Namespaces
	// of the Pods it applies to (with PodSelector, when not nil).
	NamespaceSelector labels.Selector
	// PodSelector selects the Pods of Namespace (of NamespaceSelector's
	// Namespaces) the policy applies to.
	PodSelector labels.Selector
	// Ingress and Egress are the policy types it isolates for.
	Ingress, Egress           bool
	IngressRules, EgressRules []Rule
}

// Action is what a matching rule does.
type Action uint8

const (
	// ActionAllow admits (every NetworkPolicy rule).
	ActionAllow Action = iota
	// ActionDeny denies (AdminNetworkPolicy, BaselineAdminNetworkPolicy).
	ActionDeny
	// ActionPass hands over to the NetworkPolicies (AdminNetworkPolicy).
	ActionPass
)

// Rule is one ingress or egress rule.
type Rule struct {
	// Name is "ingress-<index>" or "egress-<index>" for a NetworkPolicy
	// (package doc), the rule's own name for the cluster-scoped ones.
	Name   string
	Action Action
	// Peers nil or empty: every peer.
	Peers []Peer
	// Ports nil or empty: every port and protocol.
	Ports []Port
}

// Peer is one from/to entry. Pods and Namespaces nil with Block set is an
// ipBlock (or networks); Namespaces nil alone means the policy's own
// Namespace; Nodes set is a nodes peer.
type Peer struct {
	Pods, Namespaces labels.Selector
	Block            *IPBlock
	Nodes            labels.Selector
}

// IPBlock is a CIDR minus its excepts (masked prefixes).
type IPBlock struct {
	CIDR   netip.Prefix
	Except []netip.Prefix
}

// Port is one ports entry: Protocol with Port (0: every port), up to EndPort
// (0: Port alone), or the container port called Name (of Protocol; 0: of
// any protocol).
type Port struct {
	Protocol      uint8
	Port, EndPort uint16
	Name          string
}

// ContainerPort is a named port of a Pod's containers.
type ContainerPort struct {
	Name     string
	Protocol uint8
	Port     uint16
}

// Endpoint is one side of a connection as the caller resolved it.
type Endpoint struct {
	Address netip.Addr
	Kind    flowrecord.EndpointKind
	// Pod identity: Namespace, Labels (nil: not known, as for a Pod on
	// another Node this caller does not watch) and the containers' named
	// ports (PortsKnown false: not known).
	Namespace  string
	Labels     map[string]string
	Ports      []ContainerPort
	PortsKnown bool
}

// known reports whether the endpoint's Pod labels are known.
func (e *Endpoint) known() bool { return e.Kind == flowrecord.EndpointPod && e.Labels != nil }

// Connection is what evaluation needs of a flow.
type Connection struct {
	Protocol    uint8
	Source      Endpoint
	Destination Endpoint
	// Port is the destination port the policy ports match (after DNAT).
	Port uint16
	// Start is when the connection started: policies and labels as of then.
	Start time.Time
}

// Cluster answers what applied at a time.
type Cluster interface {
	// Policies returns the NetworkPolicies of namespace as of t, sorted by
	// name; the caller does not modify the slice.
	Policies(namespace string, t time.Time) []*Policy
	// NamespaceLabels returns a Namespace's labels as of t; false when unknown.
	NamespaceLabels(namespace string, t time.Time) (map[string]string, bool)
	// AdminPolicies returns the AdminNetworkPolicies as of t, by priority
	// then name; BaselinePolicies the BaselineAdminNetworkPolicies, by name.
	AdminPolicies(t time.Time) []*Policy
	BaselinePolicies(t time.Time) []*Policy
}

// Outcome is a verdict's kind.
type Outcome uint8

const (
	// Unisolated: no policy selects the Pod for this direction, or the
	// endpoint is not a Pod (Node, external): the side has no policy.
	Unisolated Outcome = iota
	// Allowed: a rule of Policy (RuleName) admits the connection.
	Allowed
	// Denied: the Pod is isolated (by Policy, the first NetworkPolicy by
	// name) and no rule admits it, or a Deny rule of a cluster-scoped
	// Policy (RuleName) matches it.
	Denied
	// Undetermined: no rule admits it on what is known, but one might on what is not.
	Undetermined
)

var outcomeNames = [...]string{"unisolated", "allowed", "denied", "undetermined"}

func (o Outcome) String() string { return outcomeNames[o] }

// Verdict is one direction's answer.
type Verdict struct {
	Outcome Outcome
	// Policy is the admitting (Allowed) or isolating (Denied, Undetermined) policy.
	Policy   *Policy
	RuleName string
}

// Observed is the record's policy fields for a connection the datapath let
// through (a conntrack record): the admitting policy and rule with action
// Allow; nothing for any other outcome (an unisolated side has no policy,
// and a denial the datapath did not enforce is not claimed).
func (v Verdict) Observed() flowrecord.Policy {
	if v.Outcome != Allowed {
		return flowrecord.Policy{}
	}
	return v.fields(flowrecord.RuleActionAllow)
}

// Denied is the record's policy fields for a connection the datapath
// dropped or rejected (action, as it reported): on a Denied side the
// isolating policy with that action (and the Deny rule of a cluster-scoped
// one, no rule for a NetworkPolicy); an Allowed side names its
// admitting policy (the other direction denied it); nothing otherwise.
func (v Verdict) Denied(action flowrecord.RuleAction) flowrecord.Policy {
	switch v.Outcome {
	case Allowed:
		return v.fields(flowrecord.RuleActionAllow)
	case Denied:
		return v.fields(action)
	}
	return flowrecord.Policy{}
}

func (v Verdict) fields(action flowrecord.RuleAction) flowrecord.Policy {
	return flowrecord.Policy{
		Type: cmp.Or(v.Policy.Type, flowrecord.PolicyTypeK8sNetworkPolicy), Namespace: v.Policy.Namespace, Name: v.Policy.Name,
		UID: v.Policy.UID, RuleName: v.RuleName, RuleAction: action,
	}
}

// Evaluate returns the ingress verdict (policies selecting the destination
// Pod) with isIngress, else the egress verdict (policies selecting the
// source Pod), in the precedence of the package doc.
func Evaluate(c Cluster, conn *Connection, isIngress bool) Verdict {
	subject, peer := &conn.Destination, &conn.Source
	if !isIngress {
		subject, peer = peer, subject
	}
	if subject.Kind != flowrecord.EndpointPod || subject.Namespace == "" {
		return Verdict{}
	}
	if v, decided := clusterTier(c, conn, c.AdminPolicies(conn.Start), subject, peer, isIngress); decided {
		return v
	}
	if v := namespaceTier(c, conn, subject, peer, isIngress); v.Outcome != Unisolated {
		return v
	}
	v, _ := clusterTier(c, conn, c.BaselinePolicies(conn.Start), subject, peer, isIngress)
	return v
}

// clusterTier evaluates cluster-scoped policies in order: the first rule
// that matches decides (Pass: decided false, as when none matches). What
// might match, on what is not known, leaves the verdict Undetermined.
func clusterTier(c Cluster, conn *Connection, policies []*Policy, subject, peer *Endpoint, isIngress bool) (Verdict, bool) {
	for _, p := range policies {
		switch selectsCluster(c, conn, p, subject) {
		case no:
			continue
		case maybe:
			return Verdict{Outcome: Undetermined, Policy: p}, true
		}
		rules := p.IngressRules
		if !isIngress {
			rules = p.EgressRules
		}
		for i := range rules {
			r := &rules[i]
			switch ruleMatches(c, conn, p, r, peer) {
			case maybe:
				return Verdict{Outcome: Undetermined, Policy: p}, true
			case yes:
				switch r.Action {
				case ActionPass:
					return Verdict{}, false
				case ActionDeny:
					return Verdict{Outcome: Denied, Policy: p, RuleName: r.Name}, true
				}
				return Verdict{Outcome: Allowed, Policy: p, RuleName: r.Name}, true
			}
		}
	}
	return Verdict{}, false
}

// selectsCluster is whether a cluster-scoped policy's subject is the Pod.
func selectsCluster(c Cluster, conn *Connection, p *Policy, subject *Endpoint) tri {
	return and(namespaceSelected(c, conn, p.NamespaceSelector, subject.Namespace), podSelected(p.PodSelector, subject))
}

// namespaceSelected is whether sel selects the Namespace by its labels when
// conn started: yes for a nil or empty selector, maybe when the labels are
// not known.
func namespaceSelected(c Cluster, conn *Connection, sel labels.Selector, namespace string) tri {
	if sel == nil || sel.Empty() {
		return yes
	}
	l, ok := c.NamespaceLabels(namespace, conn.Start)
	if !ok {
		return maybe
	}
	return boolTri(sel.Matches(labels.Set(l)))
}

// podSelected is whether sel selects e's Pod by its labels: yes for a nil or
// empty selector, maybe when the labels are not known.
func podSelected(sel labels.Selector, e *Endpoint) tri {
	if sel == nil || sel.Empty() {
		return yes
	}
	if !e.known() {
		return maybe
	}
	return boolTri(sel.Matches(labels.Set(e.Labels)))
}

// namespaceTier is the NetworkPolicies' verdict.
func namespaceTier(c Cluster, conn *Connection, subject, peer *Endpoint, isIngress bool) Verdict {
	var (
		v         Verdict
		uncertain bool
	)
	for _, p := range c.Policies(subject.Namespace, conn.Start) {
		rules := p.IngressRules
		if !isIngress {
			rules = p.EgressRules
		}
		if (isIngress && !p.Ingress) || (!isIngress && !p.Egress) {
			continue
		}
		switch m := p.PodSelector.Matches(labels.Set(subject.Labels)); {
		case !subject.known():
			// The subject's labels are not known: whether p selects it is
			// not either (an empty selector selects every Pod).
			if !p.PodSelector.Empty() {
				uncertain = true
				continue
			}
		case !m:
			continue
		}
		if v.Policy == nil {
			v = Verdict{Outcome: Denied, Policy: p}
		}
		for i := range rules {
			switch ruleMatches(c, conn, p, &rules[i], peer) {
			case yes:
				return Verdict{Outcome: Allowed, Policy: p, RuleName: rules[i].Name}
			case maybe:
				uncertain = true
			}
		}
	}
	if uncertain {
		v.Outcome = Undetermined
	}
	return v
}
