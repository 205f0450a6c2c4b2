// Package flowrecord is flowtel's one model of a network flow record: the typed
// Record every component works on, its enumerations, and the correlation key
// that lets the two Node halves of one connection meet at the same gateway
// replica.
//
// The packages below it build on the model and import one way:
//
//   - catalogue: every field that crosses a wire, listed once (its attribute,
//     IPFIX IEs, ClickHouse columns, a typed accessor and where it lives in
//     the Record); the exporters' layouts and tables and the documents'
//     generated tables come from it.
//   - compactcodec: the compact form of a record on the node → gateway hop,
//     its field list the catalogue's.
//   - attrcodec: the attribute form (docs/flow-schema.md) every other OTLP
//     reader sees, and the one Decode for records in either form.
package flowrecord

import (
	"net/netip"
	"time"
)

// EventName is the LogRecord EventName of every flow record.
const EventName = "network.flow"

// Bounds on what a record may carry on a wire, so one record from a faulty or
// hostile peer cannot take a collector's CPU or memory: far above what a flow
// record holds (about a hundred attributes; Pods rarely carry more than a few
// dozen labels), far below what hurts.
const (
	MaxAttributes = 1024 // attributes of one LogRecord
	MaxLabels     = 1024 // entries of one Pod's labels
)

// Record is one export of one network flow (a connection seen through conntrack),
// from one Node's point of view or, after correlation, from both.
//
// Zero values mean "unknown / not applicable": an empty string, a zero port, an
// invalid netip.Addr. Counters are cumulative totals for the whole connection plus
// deltas since the previous export of the same connection.
type Record struct {
	// Start is when the connection was first seen (conntrack start timestamp).
	Start time.Time
	// End is the last observation: the conntrack stop time of a dying connection,
	// else the poll that produced this export. It is the LogRecord Timestamp.
	End time.Time
	// Observed is when this record was exported (the LogRecord ObservedTimestamp).
	Observed time.Time

	// Protocol is the IANA protocol number (6 TCP, 17 UDP, 132 SCTP, ...).
	Protocol uint8
	// Source and Destination are the connection's endpoints. Destination holds the
	// post-DNAT endpoint (the Pod behind a Service), as in Antrea's records.
	Source      Endpoint
	Destination Endpoint

	// OriginalDestinationAddress/Port are the pre-DNAT destination (a Service IP,
	// a NodePort on a Node address, ...); equal to Destination when no DNAT happened.
	OriginalDestinationAddress netip.Addr
	OriginalDestinationPort    uint16

	// Stats counts the original direction (source → destination), ReverseStats the reply.
	Stats        Counters
	ReverseStats Counters

	EndReason EndReason
	// TCPState is the conntrack TCP state name (ESTABLISHED, TIME_WAIT, ...), "" for other protocols.
	TCPState string
	// ICMP tells ICMP and ICMPv6 conversations between the same hosts apart.
	ICMP     ICMP
	FlowType FlowType

	Service Service

	// ProxySNATAddress/Port are the source address and port after SNAT on the
	// observing hop (kube-proxy masquerade); invalid/0 when no SNAT happened.
	ProxySNATAddress netip.Addr
	ProxySNATPort    uint16

	IngressPolicy Policy
	EgressPolicy  Policy
	Egress        Egress

	Conntrack Conntrack
	Reporter  Reporter
	Direction Direction

	// Key is the correlation key (see CorrelationKey); the TraceID is its hash.
	Key         string
	Correlation CorrelationState
	// Evicted is set on a record the correlation processor exported before its
	// pairing timeout because its memory cap was reached.
	Evicted bool

	// Aggregation holds the per-Node statistics of a correlated record; nil for a
	// record that has not been through the flow_correlation processor's aggregate mode.
	Aggregation *Aggregation

	// Origin identifies the original IPFIX exporter of a record passed through in proxy mode.
	Origin Origin

	// ClusterUID is the UID of the cluster the connection was seen in. It
	// travels on the resource (ResourceClusterUID), not as a LogRecord
	// attribute, so Encode and Decode leave it alone: a component that
	// regroups records under new resources (the gateway) carries it with each
	// record from the resource it came under to the one it leaves under.
	ClusterUID string
}

// Endpoint is one side of a connection and the Kubernetes identity it resolves to.
type Endpoint struct {
	Address netip.Addr
	Port    uint16
	Kind    EndpointKind

	// Pod identity (Kind == EndpointPod).
	Namespace string
	PodName   string
	PodUID    string
	// PodLabels is nil when labels were not collected, empty for a Pod without labels.
	PodLabels map[string]string
	// WorkloadKind/Name name the Pod's owning workload (Deployment, StatefulSet,
	// DaemonSet, CronJob, Job, ReplicaSet, ...), resolved through owner references.
	WorkloadKind string
	WorkloadName string

	// NodeName is the Node the Pod runs on, or the Node itself for a node endpoint.
	NodeName string
	NodeUID  string
}

// Counters are the packet and octet counters of one direction.
type Counters struct {
	PacketTotal uint64
	OctetTotal  uint64
	PacketDelta uint64
	OctetDelta  uint64
}

// Service is the Kubernetes Service a connection was addressed to (resolved from
// the pre-DNAT destination).
type Service struct {
	// PortName is Antrea's destinationServicePortName: "namespace/name" plus ":port"
	// when the Service port is named.
	PortName string
	UID      string
	Address  netip.Addr
	Port     uint16
}

// Policy is the NetworkPolicy rule that admitted (or denied) one direction.
type Policy struct {
	Type       PolicyType
	Namespace  string
	Name       string
	UID        string
	RuleName   string
	RuleAction RuleAction
}

// Egress is the Antrea Egress (SNAT gateway) used by a to-external flow.
type Egress struct {
	Name     string
	UID      string
	Address  netip.Addr
	NodeName string
	NodeUID  string
}

// Conntrack is what the kernel's conntrack entry said about the connection.
type Conntrack struct {
	ID   uint32
	Zone uint16
	Mark uint32
	// Labels is the 128-bit ct_label, big-endian (Antrea's byte order).
	Labels [16]byte
}

// ICMP is what conntrack identifies an ICMP or ICMPv6 conversation by, in
// place of ports: the original direction's type and code (8/0 echo request,
// 128/0 for ICMPv6) and the identifier (the echo id); zero for other protocols.
type ICMP struct {
	Type, Code uint8
	ID         uint16
}

// Reporter says who produced the record: the observing Node and which half of
// the connection it reports.
type Reporter struct {
	NodeName string
	Side     Side
}

// Aggregation is the per-Node view of a correlated flow, as Antrea's Flow Aggregator keeps it.
type Aggregation struct {
	EndFromSource               time.Time
	EndFromDestination          time.Time
	StatsFromSource             Counters
	ReverseStatsFromSource      Counters
	StatsFromDestination        Counters
	ReverseStatsFromDestination Counters

	// Throughputs in bits per second since the previous report.
	Throughput                       uint64
	ReverseThroughput                uint64
	ThroughputFromSource             uint64
	ReverseThroughputFromSource      uint64
	ThroughputFromDestination        uint64
	ReverseThroughputFromDestination uint64
}

// Origin identifies the exporter a record was received from, for proxy mode.
type Origin struct {
	ObservationDomainID uint32
	ExporterAddress     netip.Addr
}

// IsIPv6 reports whether the flow's addresses are IPv6 (by the source address,
// as Antrea chooses the IPFIX template).
func (r *Record) IsIPv6() bool { return r.Source.Address.Is6() && !r.Source.Address.Is4In6() }
