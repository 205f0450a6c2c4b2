package flowrecord

import "fmt"

// The enumerations below are small integers in Go and readable strings in
// attributes. Where Antrea has a numeric value for the same thing (IPFIX, gRPC,
// ClickHouse), the Go value is Antrea's, so exporters can write it directly.

// FlowType is Antrea's flow type; the values are Antrea's.
type FlowType uint8

const (
	FlowTypeUnspecified  FlowType = 0
	FlowTypeIntraNode    FlowType = 1
	FlowTypeInterNode    FlowType = 2
	FlowTypeToExternal   FlowType = 3
	FlowTypeFromExternal FlowType = 4
)

var flowTypeNames = []string{"", "intra_node", "inter_node", "to_external", "from_external"}

func (t FlowType) String() string { return EnumName(flowTypeNames, t) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (FlowType) Names() []string { return flowTypeNames }

// EndReason is the IPFIX flowEndReason; the values are Antrea's (and RFC 5102's).
type EndReason uint8

const (
	EndReasonUnspecified     EndReason = 0
	EndReasonIdleTimeout     EndReason = 1
	EndReasonActiveTimeout   EndReason = 2
	EndReasonEndOfFlow       EndReason = 3
	EndReasonForcedEnd       EndReason = 4
	EndReasonLackOfResources EndReason = 5
)

var endReasonNames = []string{"", "idle_timeout", "active_timeout", "end_of_flow", "forced_end", "lack_of_resources"}

func (e EndReason) String() string { return EnumName(endReasonNames, e) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (EndReason) Names() []string { return endReasonNames }

// EndpointKind says what an endpoint address belongs to (decision D1).
type EndpointKind uint8

const (
	EndpointUnknown  EndpointKind = 0
	EndpointPod      EndpointKind = 1
	EndpointNode     EndpointKind = 2
	EndpointExternal EndpointKind = 3
)

var endpointKindNames = []string{"", "pod", "node", "external"}

func (k EndpointKind) String() string { return EnumName(endpointKindNames, k) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (EndpointKind) Names() []string { return endpointKindNames }

// InCluster reports whether the endpoint is a Pod or a Node.
func (k EndpointKind) InCluster() bool { return k == EndpointPod || k == EndpointNode }

// Side is the half of a connection a Node reports.
type Side uint8

const (
	SideUnknown     Side = 0
	SideSource      Side = 1 // the Node of the source endpoint (or the ingress Node of a from-external flow)
	SideDestination Side = 2 // the Node of the destination endpoint
	SideBoth        Side = 3 // both endpoints are local: nothing to pair
	// SideRelay is the onward leg of a connection this Node DNATed for a
	// client on another Node and forwarded to the endpoint's Node (a NodePort
	// whose endpoint runs on a third Node). The connection is reported under
	// its first leg's key (this Node's destination half); the relay record
	// exists only so the gateway can pair and fold away the endpoint Node's
	// half, which sees this Node as the client.
	SideRelay Side = 4
)

var sideNames = []string{"", "source", "destination", "both", "relay"}

func (s Side) String() string { return EnumName(sideNames, s) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (Side) Names() []string { return sideNames }

// Direction is the flow direction of proxy-mode records. The Go values are not
// Antrea's (whose ingress is 0); use IPFIX for the wire value.
type Direction uint8

const (
	DirectionUnset   Direction = 0
	DirectionIngress Direction = 1
	DirectionEgress  Direction = 2
	DirectionUnknown Direction = 3
)

var directionNames = []string{"", "ingress", "egress", "unknown"}

func (d Direction) String() string { return EnumName(directionNames, d) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (Direction) Names() []string { return directionNames }

// IPFIX returns Antrea's flowDirection value: 0 ingress, 1 egress, 255 unknown.
func (d Direction) IPFIX() uint8 {
	switch d {
	case DirectionIngress:
		return 0
	case DirectionEgress:
		return 1
	default:
		return 255
	}
}

// PolicyType is the kind of NetworkPolicy; the values up to 4 are Antrea's.
// Antrea has none for AdminNetworkPolicy and BaselineAdminNetworkPolicy
// (sigs.k8s.io/network-policy-api v1alpha1): flowtel's are 5 and 6, after
// Antrea's last (decision D12).
type PolicyType uint8

const (
	PolicyTypeUnspecified                PolicyType = 0
	PolicyTypeK8sNetworkPolicy           PolicyType = 1
	PolicyTypeAntreaNetworkPolicy        PolicyType = 2
	PolicyTypeAntreaClusterNetworkPolicy PolicyType = 3
	PolicyTypeK8sClusterNetworkPolicy    PolicyType = 4
	PolicyTypeAdminNetworkPolicy         PolicyType = 5
	PolicyTypeBaselineAdminNetworkPolicy PolicyType = 6
)

var policyTypeNames = []string{"", "k8s_network_policy", "antrea_network_policy", "antrea_cluster_network_policy", "k8s_cluster_network_policy",
	"admin_network_policy", "baseline_admin_network_policy"}

func (p PolicyType) String() string { return EnumName(policyTypeNames, p) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (PolicyType) Names() []string { return policyTypeNames }

// RuleAction is a policy rule's action; the values are Antrea's.
type RuleAction uint8

const (
	RuleActionNone   RuleAction = 0
	RuleActionAllow  RuleAction = 1
	RuleActionDrop   RuleAction = 2
	RuleActionReject RuleAction = 3
)

var ruleActionNames = []string{"", "allow", "drop", "reject"}

func (a RuleAction) String() string { return EnumName(ruleActionNames, a) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (RuleAction) Names() []string { return ruleActionNames }

// CorrelationState says what the gateway did about pairing (decision D4).
type CorrelationState uint8

const (
	CorrelationNone        CorrelationState = 0 // not through a correlation processor yet
	CorrelationPaired      CorrelationState = 1
	CorrelationUnpaired    CorrelationState = 2
	CorrelationNotRequired CorrelationState = 3
)

var correlationNames = []string{"", "paired", "unpaired", "not_required"}

func (c CorrelationState) String() string { return EnumName(correlationNames, c) }

// Names are the values' names, indexed by value ("" for the zero value); read only.
func (CorrelationState) Names() []string { return correlationNames }

// Enum is an enumeration of the record: a uint8 whose values have names.
type Enum interface {
	~uint8
	Names() []string
}

// EnumName is the name of v among names (an Enum's Names), its number
// when it has none.
func EnumName[T ~uint8](names []string, v T) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%d", uint8(v))
}

// ParseEnum returns the value of names (an Enum's Names) whose name is s.
// The empty name is never matched: a wire value "" is malformed (encoders
// omit unset enums).
func ParseEnum[T ~uint8](names []string, s string) (T, bool) {
	for i, n := range names {
		if n != "" && n == s {
			return T(i), true
		}
	}
	return 0, false
}

// IANA protocol numbers of ICMP and ICMPv6.
const (
	protocolICMP   = 1
	protocolICMPv6 = 58
)

// protocols are the IANA protocol numbers that have an OTel
// network.transport value, with it: one table, so that ProtocolName and
// ProtocolNumber stay each other's inverse.
var protocols = [...]struct {
	number uint8
	name   string
}{{protocolICMP, "icmp"}, {6, "tcp"}, {17, "udp"}, {protocolICMPv6, "ipv6-icmp"}, {132, "sctp"}}

// ProtocolName returns the OTel network.transport value for an IANA protocol number.
func ProtocolName(p uint8) string {
	for _, pr := range protocols {
		if pr.number == p {
			return pr.name
		}
	}
	return "unknown"
}

// ProtocolNumber is the inverse of ProtocolName; ok is false for "unknown" and unknown names.
func ProtocolNumber(name string) (uint8, bool) {
	for _, pr := range protocols {
		if pr.name == name {
			return pr.number, true
		}
	}
	return 0, false
}
