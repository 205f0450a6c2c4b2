// Package flowtable is the ClickHouse `flows` table the clickhouse_flows
// exporter writes: its columns (Antrea's 51 plus flowtel's own), how each is
// filled from a flowrecord.Record, the DDL that creates it on every ClickHouse
// version from 18.16 on, and the column-oriented block that one INSERT sends.
package flowtable

import (
	"math"
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// kind is the Go representation of a column's values in a Block.
type kind uint8

const (
	kindTime   kind = iota // DateTime, carried as Unix seconds
	kindUInt8              // UInt8
	kindUInt16             // UInt16
	kindUInt64             // UInt64
	kindString             // String
	kindAddr               // String: an address in textual form
	kindLabels             // String: Pod labels as JSON
)

// Row is what one table row is made from: the record and the cluster UUID
// chosen for it (configured, or its resource's k8s.cluster.uid).
type Row struct {
	Record      *flowrecord.Record
	ClusterUUID string
}

// Column is one column the exporter writes.
type Column struct {
	Name string
	// Type is the ClickHouse type used when the exporter creates the table.
	Type string
	// Flowtel marks the columns flowtel appends after Antrea's.
	Flowtel bool

	kind kind
	time func(*Row) time.Time
	u8   func(*Row) uint8
	u16  func(*Row) uint16
	u64  func(*Row) uint64
	str  func(*Row) string
	addr func(*Row) netip.Addr
	labs func(*Row) map[string]string
}

func timeCol(name string, f func(*Row) time.Time) Column {
	return Column{Name: name, Type: "DateTime", kind: kindTime, time: f}
}
func u8Col(name string, f func(*Row) uint8) Column {
	return Column{Name: name, Type: "UInt8", kind: kindUInt8, u8: f}
}
func u16Col(name string, f func(*Row) uint16) Column {
	return Column{Name: name, Type: "UInt16", kind: kindUInt16, u16: f}
}
func u64Col(name string, f func(*Row) uint64) Column {
	return Column{Name: name, Type: "UInt64", kind: kindUInt64, u64: f}
}
func strCol(name string, f func(*Row) string) Column {
	return Column{Name: name, Type: "String", kind: kindString, str: f}
}

func addrCol(name string, f func(*Row) netip.Addr) Column {
	return Column{Name: name, Type: "String", kind: kindAddr, addr: f}
}
func labelsCol(name string, f func(*Row) map[string]string) Column {
	return Column{Name: name, Type: "String", kind: kindLabels, labs: f}
}

func flowtel(cs ...Column) []Column {
	for i := range cs {
		cs[i].Flowtel = true
	}
	return cs
}

// Columns lists the inserted columns in INSERT order: Antrea's 51 in the order
// of Antrea's table, then flowtel's. The Antrea table also has timeInserted
// (DEFAULT now()) and trusted (DEFAULT 0), which are never inserted.
var Columns = buildColumns()

func buildColumns() []Column {
	var cs []Column
	add := func(c ...Column) { cs = append(cs, c...) }
	src := func(r *Row) *flowrecord.Endpoint { return &r.Record.Source }
	dst := func(r *Row) *flowrecord.Endpoint { return &r.Record.Destination }

	add(
		timeCol("flowStartSeconds", func(r *Row) time.Time { return r.Record.Start }),
		timeCol("flowEndSeconds", func(r *Row) time.Time { return r.Record.End }),
		timeCol("flowEndSecondsFromSourceNode", endFromSourceNode),
		timeCol("flowEndSecondsFromDestinationNode", endFromDestinationNode),
		u8Col("flowEndReason", func(r *Row) uint8 { return uint8(r.Record.EndReason) }),
		addrCol("sourceIP", func(r *Row) netip.Addr { return r.Record.Source.Address }),
		addrCol("destinationIP", func(r *Row) netip.Addr { return r.Record.Destination.Address }),
		u16Col("sourceTransportPort", func(r *Row) uint16 { return r.Record.Source.Port }),
		u16Col("destinationTransportPort", func(r *Row) uint16 { return r.Record.Destination.Port }),
		u8Col("protocolIdentifier", func(r *Row) uint8 { return r.Record.Protocol }),
	)
	add(counterCols("", func(r *Row) *flowrecord.Counters { return &r.Record.Stats })...)
	add(counterCols("reverse", func(r *Row) *flowrecord.Counters { return &r.Record.ReverseStats })...)
	add(
		strCol("sourcePodName", func(r *Row) string { return src(r).PodName }),
		strCol("sourcePodNamespace", func(r *Row) string { return src(r).Namespace }),
		strCol("sourceNodeName", func(r *Row) string { return src(r).NodeName }),
		strCol("destinationPodName", func(r *Row) string { return dst(r).PodName }),
		strCol("destinationPodNamespace", func(r *Row) string { return dst(r).Namespace }),
		strCol("destinationNodeName", func(r *Row) string { return dst(r).NodeName }),
		addrCol("destinationClusterIP", func(r *Row) netip.Addr { return r.Record.Service.Address }),
		u16Col("destinationServicePort", func(r *Row) uint16 { return r.Record.Service.Port }),
		strCol("destinationServicePortName", func(r *Row) string { return r.Record.Service.PortName }),
	)
	add(policyCols("ingress", func(r *Row) *flowrecord.Policy { return &r.Record.IngressPolicy })...)
	add(policyCols("egress", func(r *Row) *flowrecord.Policy { return &r.Record.EgressPolicy })...)
	add(
		strCol("tcpState", func(r *Row) string { return r.Record.TCPState }),
		u8Col("flowType", func(r *Row) uint8 { return uint8(r.Record.FlowType) }),
		labelsCol("sourcePodLabels", func(r *Row) map[string]string { return src(r).PodLabels }),
		labelsCol("destinationPodLabels", func(r *Row) map[string]string { return dst(r).PodLabels }),
		u64Col("throughput", aggU64(func(a *flowrecord.Aggregation) uint64 { return a.Throughput })),
		u64Col("reverseThroughput", aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseThroughput })),
		u64Col("throughputFromSourceNode", aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ThroughputFromSource })),
		u64Col("throughputFromDestinationNode", aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ThroughputFromDestination })),
		u64Col("reverseThroughputFromSourceNode", aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseThroughputFromSource })),
		u64Col("reverseThroughputFromDestinationNode", aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseThroughputFromDestination })),
		strCol("clusterUUID", func(r *Row) string { return r.ClusterUUID }),
		strCol("egressName", func(r *Row) string { return r.Record.Egress.Name }),
		addrCol("egressIP", func(r *Row) netip.Addr { return r.Record.Egress.Address }),
		strCol("egressNodeName", func(r *Row) string { return r.Record.Egress.NodeName }),
	)

	// flowtel's own columns; names are the ClickHouse columns of
	// internal/flowrecord/schema.go.
	add(endpointCols("source", src)...)
	add(endpointCols("destination", dst)...)
	add(flowtel(
		addrCol("originalDestinationIP", func(r *Row) netip.Addr { return r.Record.OriginalDestinationAddress }),
		u16Col("originalDestinationPort", func(r *Row) uint16 { return r.Record.OriginalDestinationPort }),
		strCol("destinationServiceUID", func(r *Row) string { return r.Record.Service.UID }),
		addrCol("destinationServiceIP", func(r *Row) netip.Addr { return r.Record.Service.Address }),
		addrCol("proxySnatIP", func(r *Row) netip.Addr { return r.Record.ProxySNATAddress }),
		u16Col("proxySnatPort", func(r *Row) uint16 { return r.Record.ProxySNATPort }),
		strCol("correlationState", func(r *Row) string { return r.Record.Correlation.String() }),
	)...)
	return cs
}

func counterCols(prefix string, get func(*Row) *flowrecord.Counters) []Column {
	name := func(base string) string {
		if prefix == "" {
			return base
		}
		return prefix + string(base[0]-'a'+'A') + base[1:]
	}
	return []Column{
		u64Col(name("packetTotalCount"), func(r *Row) uint64 { return get(r).PacketTotal }),
		u64Col(name("octetTotalCount"), func(r *Row) uint64 { return get(r).OctetTotal }),
		u64Col(name("packetDeltaCount"), func(r *Row) uint64 { return get(r).PacketDelta }),
		u64Col(name("octetDeltaCount"), func(r *Row) uint64 { return get(r).OctetDelta }),
	}
}

func policyCols(dir string, get func(*Row) *flowrecord.Policy) []Column {
	p := dir + "NetworkPolicy"
	return []Column{
		strCol(p+"Name", func(r *Row) string { return get(r).Name }),
		strCol(p+"Namespace", func(r *Row) string { return get(r).Namespace }),
		strCol(p+"RuleName", func(r *Row) string { return get(r).RuleName }),
		u8Col(p+"RuleAction", func(r *Row) uint8 { return uint8(get(r).RuleAction) }),
		u8Col(p+"Type", func(r *Row) uint8 { return uint8(get(r).Type) }),
	}
}

func endpointCols(side string, get func(*Row) *flowrecord.Endpoint) []Column {
	return flowtel(
		strCol(side+"EndpointKind", func(r *Row) string { return get(r).Kind.String() }),
		strCol(side+"PodUID", func(r *Row) string { return get(r).PodUID }),
		strCol(side+"WorkloadKind", func(r *Row) string { return get(r).WorkloadKind }),
		strCol(side+"WorkloadName", func(r *Row) string { return get(r).WorkloadName }),
		strCol(side+"NodeUID", func(r *Row) string { return get(r).NodeUID }),
	)
}

// Per-Node columns of a record that was not aggregated (no per-Node
// statistics; Antrea cannot write such records at all): the end time of the
// Node that reported it is the record's own end, the other Node's is zero
// (1970-01-01, as Antrea writes an unset time), and the throughputs are zero.

func endFromSourceNode(r *Row) time.Time {
	if a := r.Record.Aggregation; a != nil {
		return a.EndFromSource
	}
	if s := r.Record.Reporter.Side; s == flowrecord.SideSource || s == flowrecord.SideBoth {
		return r.Record.End
	}
	return time.Time{}
}

func endFromDestinationNode(r *Row) time.Time {
	if a := r.Record.Aggregation; a != nil {
		return a.EndFromDestination
	}
	if s := r.Record.Reporter.Side; s == flowrecord.SideDestination || s == flowrecord.SideBoth {
		return r.Record.End
	}
	return time.Time{}
}

func aggU64(get func(*flowrecord.Aggregation) uint64) func(*Row) uint64 {
	return func(r *Row) uint64 {
		if a := r.Record.Aggregation; a != nil {
			return get(a)
		}
		return 0
	}
}

// seconds is t as DateTime seconds, clamped to DateTime's range; the zero time is 0.
func seconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	s := t.Unix()
	return max(0, min(s, math.MaxUint32))
}
