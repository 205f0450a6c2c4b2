package flowrecord

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/xpdata"
)

// The compact encoding (architecture decision D13) is flowtel's own form of a
// flow record for the hop between its node collectors and its gateways: the
// LogRecord fields as Encode writes them, two attributes (AttrRecordEncoding
// and flow.key, which load_balancing routes on) and the rest of the Record as
// bytes in the Body. It is not a public schema: the gateway reads it and
// writes the attribute form (docs/flow-schema.md) for everything downstream.
//
// Version 1 body: the fields below in this order, each
//
//	uint8, enum, bool  one byte (enums within their names, bools 0 or 1)
//	uint16/32/64       unsigned LEB128 varint (within the type's range)
//	time               signed zigzag varint of ns since the Unix epoch, 0 = unset
//	string             varint length, then the UTF-8 bytes as they are
//	address            one byte 0 (unset), 4 (IPv4: 4 bytes), 16 (IPv6: 16 bytes)
//	                   or 17 (IPv6 with a zone: 16 bytes, then the zone as a string)
//	labels             varint n+1 (0 = nil, 1 = empty), then n × (key, value) strings
//	ct_label           one byte 0 (all zero) or 16, then 16 bytes
//	aggregation        one byte 0 (nil) or 1, then its fields
//
// Start, Protocol, Source, Destination (each: Address, Port, Kind, Namespace,
// PodName, PodUID, PodLabels, WorkloadKind, WorkloadName, NodeName, NodeUID),
// OriginalDestinationAddress, OriginalDestinationPort, Stats, ReverseStats
// (each: PacketTotal, OctetTotal, PacketDelta, OctetDelta), EndReason,
// TCPState, ICMP (Type, Code, ID), FlowType, Service (PortName, UID, Address,
// Port), ProxySNATAddress, ProxySNATPort, IngressPolicy, EgressPolicy (each:
// Type, Namespace, Name, UID, RuleName, RuleAction), Egress (Name, UID,
// Address, NodeName, NodeUID), Conntrack (ID, Zone, Mark, Labels), Reporter
// (NodeName, Side), Direction, Correlation, Evicted, Origin
// (ObservationDomainID, ExporterAddress), Aggregation (EndFromSource,
// EndFromDestination, StatsFromSource, ReverseStatsFromSource,
// StatsFromDestination, ReverseStatsFromDestination, Throughput,
// ReverseThroughput, ThroughputFromSource, ReverseThroughputFromSource,
// ThroughputFromDestination, ReverseThroughputFromDestination).
//
// End and Observed are the LogRecord Timestamp and ObservedTimestamp, Key the
// flow.key attribute, ClusterUID the resource's, as in the attribute form.
// Nothing may follow the last field. A change to the layout is a new version:
// a reader refuses versions it does not know (gateways are upgraded first).

// AttrRecordEncoding is the attribute naming the encoding of a record that is
// not in the attribute form, and its version (EncodingCompactV1).
const AttrRecordEncoding = "flowtel.record.encoding"

// EncodingCompactV1 is the value of AttrRecordEncoding on a record in version
// 1 of the compact encoding.
const EncodingCompactV1 = "compact/1"

// compactAttributes bounds the attributes a record may carry to be read as
// compact without a bytes Body (to name what is wrong with it): a compact
// record has two, an attribute-form one at least three.
const compactAttributes = 2

// isCompact reports whether lr is in the compact encoding: its Body is bytes,
// or it carries AttrRecordEncoding and too few attributes for the attribute form.
func isCompact(lr plog.LogRecord) bool {
	if lr.Body().Type() == pcommon.ValueTypeBytes {
		return true
	}
	if lr.Attributes().Len() > compactAttributes {
		return false
	}
	_, ok := lr.Attributes().Get(AttrRecordEncoding)
	return ok
}

// clearBody empties lr's Body: a record re-encoded in the attribute form must
// not keep the bytes of a compact one.
func clearBody(lr plog.LogRecord) {
	if lr.Body().Type() != pcommon.ValueTypeEmpty {
		_ = lr.Body().FromRaw(nil) // nil cannot fail
	}
}

// compactBuffers are scratch buffers for EncodeCompact's body.
var compactBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// EncodeCompact writes r into lr in the compact encoding: EventName,
// Timestamp, ObservedTimestamp and TraceID as Encode writes them, the
// attributes AttrRecordEncoding and flow.key (when r has a key; lr's previous
// attributes are cleared) and the rest of r as bytes in the Body. Decode reads
// it back; only flowtel's own components should be given it.
func EncodeCompact(r *Record, lr plog.LogRecord) {
	lr.SetEventName(EventName)
	lr.SetTimestamp(timestamp(r.End))
	lr.SetObservedTimestamp(timestamp(r.Observed))
	var b xpdata.MapBuilder
	if r.Key != "" {
		lr.SetTraceID(KeyHash(r.Key))
		b.EnsureCapacity(2)
		b.AppendEmpty(AttrKey).SetStr(r.Key)
	} else {
		lr.SetTraceID(pcommon.NewTraceIDEmpty())
		b.EnsureCapacity(1)
	}
	b.AppendEmpty(AttrRecordEncoding).SetStr(EncodingCompactV1)
	b.UnsafeIntoMap(lr.Attributes())

	buf := compactBuffers.Get().(*[]byte)
	w := compactWriter{b: (*buf)[:0]}
	w.record(r)
	lr.Body().SetEmptyBytes().FromRaw(w.b) // copies
	*buf = w.b
	compactBuffers.Put(buf)
}

type compactWriter struct{ b []byte }

func (w *compactWriter) u8(v uint8)       { w.b = append(w.b, v) }
func (w *compactWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *compactWriter) boolean(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *compactWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *compactWriter) time(t time.Time) {
	if t.IsZero() {
		w.u8(0)
		return
	}
	w.b = binary.AppendVarint(w.b, t.UnixNano())
}

func (w *compactWriter) addr(a netip.Addr) {
	switch {
	case !a.IsValid():
		w.u8(0)
	case a.Is4():
		w.u8(4)
		b := a.As4()
		w.b = append(w.b, b[:]...)
	default:
		b := a.As16()
		if z := a.Zone(); z != "" {
			w.u8(17)
			w.b = append(w.b, b[:]...)
			w.str(z)
			return
		}
		w.u8(16)
		w.b = append(w.b, b[:]...)
	}
}

func (w *compactWriter) labels(m map[string]string) {
	if m == nil {
		w.u8(0)
		return
	}
	w.uvarint(uint64(len(m)) + 1)
	for k, v := range m {
		w.str(k)
		w.str(v)
	}
}

func (w *compactWriter) counters(c *Counters) {
	w.uvarint(c.PacketTotal)
	w.uvarint(c.OctetTotal)
	w.uvarint(c.PacketDelta)
	w.uvarint(c.OctetDelta)
}

func (w *compactWriter) endpoint(e *Endpoint) {
	w.addr(e.Address)
	w.uvarint(uint64(e.Port))
	w.u8(uint8(e.Kind))
	w.str(e.Namespace)
	w.str(e.PodName)
	w.str(e.PodUID)
	w.labels(e.PodLabels)
	w.str(e.WorkloadKind)
	w.str(e.WorkloadName)
	w.str(e.NodeName)
	w.str(e.NodeUID)
}

func (w *compactWriter) policy(p *Policy) {
	w.u8(uint8(p.Type))
	w.str(p.Namespace)
	w.str(p.Name)
	w.str(p.UID)
	w.str(p.RuleName)
	w.u8(uint8(p.RuleAction))
}

// record writes the version 1 body; compactReader.record reads it.
func (w *compactWriter) record(r *Record) {
	w.time(r.Start)
	w.u8(r.Protocol)
	w.endpoint(&r.Source)
	w.endpoint(&r.Destination)
	w.addr(r.OriginalDestinationAddress)
	w.uvarint(uint64(r.OriginalDestinationPort))
	w.counters(&r.Stats)
	w.counters(&r.ReverseStats)
	w.u8(uint8(r.EndReason))
	w.str(r.TCPState)
	w.u8(r.ICMP.Type)
	w.u8(r.ICMP.Code)
	w.uvarint(uint64(r.ICMP.ID))
	w.u8(uint8(r.FlowType))
	w.str(r.Service.PortName)
	w.str(r.Service.UID)
	w.addr(r.Service.Address)
	w.uvarint(uint64(r.Service.Port))
	w.addr(r.ProxySNATAddress)
	w.uvarint(uint64(r.ProxySNATPort))
	w.policy(&r.IngressPolicy)
	w.policy(&r.EgressPolicy)
	w.str(r.Egress.Name)
	w.str(r.Egress.UID)
	w.addr(r.Egress.Address)
	w.str(r.Egress.NodeName)
	w.str(r.Egress.NodeUID)
	w.uvarint(uint64(r.Conntrack.ID))
	w.uvarint(uint64(r.Conntrack.Zone))
	w.uvarint(uint64(r.Conntrack.Mark))
	if r.Conntrack.Labels == ([16]byte{}) {
		w.u8(0)
	} else {
		w.u8(16)
		w.b = append(w.b, r.Conntrack.Labels[:]...)
	}
	w.str(r.Reporter.NodeName)
	w.u8(uint8(r.Reporter.Side))
	w.u8(uint8(r.Direction))
	w.u8(uint8(r.Correlation))
	w.boolean(r.Evicted)
	w.uvarint(uint64(r.Origin.ObservationDomainID))
	w.addr(r.Origin.ExporterAddress)
	a := r.Aggregation
	if a == nil {
		w.u8(0)
		return
	}
	w.u8(1)
	w.time(a.EndFromSource)
	w.time(a.EndFromDestination)
	w.counters(&a.StatsFromSource)
	w.counters(&a.ReverseStatsFromSource)
	w.counters(&a.StatsFromDestination)
	w.counters(&a.ReverseStatsFromDestination)
	w.uvarint(a.Throughput)
	w.uvarint(a.ReverseThroughput)
	w.uvarint(a.ThroughputFromSource)
	w.uvarint(a.ReverseThroughputFromSource)
	w.uvarint(a.ThroughputFromDestination)
	w.uvarint(a.ReverseThroughputFromDestination)
}

// decodeCompact is Decode for a record isCompact says is compact.
func decodeCompact(lr plog.LogRecord, r *Record, s *spares) error {
	*r = Record{}
	attrs := lr.Attributes()
	if n := attrs.Len(); n > MaxAttributes {
		return fmt.Errorf("record has %d attributes (at most %d); a compact flow record carries %d", n, MaxAttributes, compactAttributes)
	}
	v, ok := attrs.Get(AttrRecordEncoding)
	if !ok {
		return fmt.Errorf("attribute %q: missing on a record whose Body is bytes; a flow record in the attribute form has no Body, a compact one names its encoding", AttrRecordEncoding)
	}
	if v.Type() != pcommon.ValueTypeStr {
		return typeError(AttrRecordEncoding, "string", v)
	}
	if v.Str() != EncodingCompactV1 {
		return fmt.Errorf("attribute %q: unknown encoding (got %q; this collector reads %q); upgrade the gateways before the node collectors", AttrRecordEncoding, v.Str(), EncodingCompactV1)
	}
	if t := lr.Body().Type(); t != pcommon.ValueTypeBytes {
		return fmt.Errorf("attribute %q: %q, but the Body is %s, want Bytes", AttrRecordEncoding, EncodingCompactV1, t)
	}
	if k, ok := attrs.Get(AttrKey); ok {
		if k.Type() != pcommon.ValueTypeStr {
			return typeError(AttrKey, "string", k)
		}
		r.Key = k.Str()
	}
	r.End = fromTimestamp(lr.Timestamp())
	r.Observed = fromTimestamp(lr.ObservedTimestamp())
	// One copy of the body, as a string the record's strings are slices of
	// (one allocation for all of them). AsRaw copies already and nothing else
	// holds that copy, so it becomes the string as it is.
	raw := lr.Body().Bytes().AsRaw()
	d := compactReader{s: unsafe.String(unsafe.SliceData(raw), len(raw)), spares: s}
	d.record(r)
	if d.err == nil && d.i < len(d.s) {
		d.fail("body", fmt.Sprintf("%d bytes after the last field", len(d.s)-d.i))
	}
	switch {
	case d.err != nil:
		return d.err
	case !r.Source.Address.IsValid():
		return missing(AttrSourceAddress)
	case !r.Destination.Address.IsValid():
		return missing(AttrDestinationAddress)
	}
	return nil
}

// compactReader reads a version 1 body. The first error is kept and ends the
// reading: every read after it returns zero.
type compactReader struct {
	s      string
	i      int
	err    error
	spares *spares
}

// fail records what is wrong with field, unless an earlier error is recorded.
func (d *compactReader) fail(field, what string) {
	if d.err == nil {
		d.err = fmt.Errorf("attribute %q %s: field %q: %s", AttrRecordEncoding, EncodingCompactV1, field, what)
	}
	d.i = len(d.s)
}

func (d *compactReader) truncated(field string) {
	if d.err == nil {
		d.fail(field, "the Body ends before it (truncated)")
	}
}

func (d *compactReader) u8(field string) uint8 {
	if d.i >= len(d.s) {
		d.truncated(field)
		return 0
	}
	c := d.s[d.i]
	d.i++
	return c
}

func (d *compactReader) uvarint(field string) uint64 {
	var x uint64
	for shift := uint(0); ; shift += 7 {
		if d.i >= len(d.s) {
			d.truncated(field)
			return 0
		}
		c := d.s[d.i]
		d.i++
		if shift == 63 && c > 1 {
			d.fail(field, "varint overflows 64 bits")
			return 0
		}
		if c < 0x80 {
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
	}
}

// uint reads a varint of at most maxV.
func (d *compactReader) uint(field string, maxV uint64) uint64 {
	v := d.uvarint(field)
	if v > maxV {
		d.fail(field, fmt.Sprintf("value %d out of range [0, %d]", v, maxV))
		return 0
	}
	return v
}

func (d *compactReader) u16(field string) uint16 { return uint16(d.uint(field, math.MaxUint16)) }
func (d *compactReader) u32(field string) uint32 { return uint32(d.uint(field, math.MaxUint32)) }

// enum reads a byte naming one of names (0: unset).
func (d *compactReader) enum(field string, names []string) uint8 {
	v := d.u8(field)
	if int(v) >= len(names) {
		d.fail(field, fmt.Sprintf("unknown value %d (want at most %d)", v, len(names)-1))
		return 0
	}
	return v
}

func (d *compactReader) boolean(field string) bool {
	switch d.u8(field) {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(field, fmt.Sprintf("bool is %d, want 0 or 1", d.s[d.i-1]))
	return false
}

func (d *compactReader) str(field string) string {
	n := d.uvarint(field)
	if left := uint64(len(d.s) - d.i); n > left {
		if d.err == nil {
			d.fail(field, fmt.Sprintf("length %d runs past the end of the Body (%d bytes left)", n, left))
		}
		return ""
	}
	s := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return s
}

// raw reads n bytes ("" and an error when fewer are left).
func (d *compactReader) raw(field string, n int) (string, bool) {
	if len(d.s)-d.i < n {
		d.truncated(field)
		return "", false
	}
	b := d.s[d.i : d.i+n]
	d.i += n
	return b, true
}

func (d *compactReader) time(field string) time.Time {
	u := d.uvarint(field)
	ns := int64(u>>1) ^ -int64(u&1) // zigzag, as binary.AppendVarint writes it
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func (d *compactReader) addr(field string) netip.Addr {
	switch tag := d.u8(field); tag {
	case 0:
		return netip.Addr{}
	case 4:
		var b [4]byte
		if s, ok := d.raw(field, 4); ok {
			copy(b[:], s)
			return netip.AddrFrom4(b)
		}
	case 16, 17:
		var b [16]byte
		s, ok := d.raw(field, 16)
		if !ok {
			return netip.Addr{}
		}
		copy(b[:], s)
		a := netip.AddrFrom16(b)
		if tag == 17 {
			z := d.str(field)
			if z == "" && d.err == nil {
				d.fail(field, "IPv6 address with an empty zone")
			}
			a = a.WithZone(z)
		}
		return a
	default:
		d.fail(field, fmt.Sprintf("address tag %d, want 0, 4, 16 or 17", tag))
	}
	return netip.Addr{}
}

func (d *compactReader) labels(field string, slot int) map[string]string {
	n := d.uvarint(field)
	if n == 0 {
		return nil
	}
	n--
	if n > MaxLabels {
		d.fail(field, fmt.Sprintf("%d labels (at most %d)", n, MaxLabels))
		return nil
	}
	if left := uint64(len(d.s) - d.i); n > left/2 { // a label takes two bytes at least
		d.fail(field, fmt.Sprintf("%d labels run past the end of the Body (%d bytes left)", n, left))
		return nil
	}
	m := d.spares.take(slot, int(n))
	for range n {
		k := d.str(field)
		m[k] = d.str(field)
	}
	if d.err == nil && uint64(len(m)) != n {
		d.fail(field, fmt.Sprintf("%d labels, %d of them distinct", n, len(m)))
	}
	return m
}

// The field names of the Record's repeated parts, built once (a name built
// for every read would be an allocation a field).
type (
	counterNames  [4]string
	endpointNames struct {
		slot                                                                             int // of the labels map in spares
		address, port, kind, namespace, pod, podUID, labels, wkind, wname, node, nodeUID string
	}
	policyNames struct{ typ, namespace, name, uid, rule, action string }
)

func newCounterNames(prefix string) counterNames {
	return counterNames{prefix + "packets.total", prefix + "bytes.total", prefix + "packets.delta", prefix + "bytes.delta"}
}

func newEndpointNames(side string, slot int) endpointNames {
	p := side + "."
	return endpointNames{slot: slot, address: p + "address", port: p + "port", kind: "flow." + side + ".kind",
		namespace: p + "k8s.namespace.name", pod: p + "k8s.pod.name", podUID: p + "k8s.pod.uid", labels: p + "k8s.pod.labels",
		wkind: p + "k8s.workload.kind", wname: p + "k8s.workload.name", node: p + "k8s.node.name", nodeUID: p + "k8s.node.uid"}
}

func newPolicyNames(dir string) policyNames {
	p := "flow." + dir + "_policy."
	return policyNames{p + "type", p + "namespace", p + "name", p + "uid", p + "rule_name", p + "rule_action"}
}

var (
	statsNames, reverseStatsNames = newCounterNames("flow."), newCounterNames("flow.reverse.")
	fromSourceNames               = newCounterNames("flow.source_node.")
	reverseFromSourceNames        = newCounterNames("flow.source_node.reverse.")
	fromDestinationNames          = newCounterNames("flow.destination_node.")
	reverseFromDestinationNames   = newCounterNames("flow.destination_node.reverse.")
	sourceNames                   = newEndpointNames("source", 0)
	destinationNames              = newEndpointNames("destination", 1)
	ingressNames, egressNames     = newPolicyNames("ingress"), newPolicyNames("egress")
)

func (d *compactReader) counters(n *counterNames, c *Counters) {
	c.PacketTotal = d.uvarint(n[0])
	c.OctetTotal = d.uvarint(n[1])
	c.PacketDelta = d.uvarint(n[2])
	c.OctetDelta = d.uvarint(n[3])
}

func (d *compactReader) endpoint(n *endpointNames, e *Endpoint) {
	e.Address = d.addr(n.address)
	e.Port = d.u16(n.port)
	e.Kind = EndpointKind(d.enum(n.kind, endpointKindNames))
	e.Namespace = d.str(n.namespace)
	e.PodName = d.str(n.pod)
	e.PodUID = d.str(n.podUID)
	e.PodLabels = d.labels(n.labels, n.slot)
	e.WorkloadKind = d.str(n.wkind)
	e.WorkloadName = d.str(n.wname)
	e.NodeName = d.str(n.node)
	e.NodeUID = d.str(n.nodeUID)
}

func (d *compactReader) policy(n *policyNames, p *Policy) {
	p.Type = PolicyType(d.enum(n.typ, policyTypeNames))
	p.Namespace = d.str(n.namespace)
	p.Name = d.str(n.name)
	p.UID = d.str(n.uid)
	p.RuleName = d.str(n.rule)
	p.RuleAction = RuleAction(d.enum(n.action, ruleActionNames))
}

// record reads what compactWriter.record writes, naming each field by its
// attribute in the schema.
func (d *compactReader) record(r *Record) {
	r.Start = d.time("flow.start")
	r.Protocol = d.u8(AttrProtocol)
	d.endpoint(&sourceNames, &r.Source)
	d.endpoint(&destinationNames, &r.Destination)
	r.OriginalDestinationAddress = d.addr("flow.original_destination.address")
	r.OriginalDestinationPort = d.u16("flow.original_destination.port")
	d.counters(&statsNames, &r.Stats)
	d.counters(&reverseStatsNames, &r.ReverseStats)
	r.EndReason = EndReason(d.enum("flow.end_reason", endReasonNames))
	r.TCPState = d.str("flow.tcp.state")
	r.ICMP.Type = d.u8("flow.icmp.type")
	r.ICMP.Code = d.u8("flow.icmp.code")
	r.ICMP.ID = d.u16("flow.icmp.id")
	r.FlowType = FlowType(d.enum("flow.type", flowTypeNames))
	r.Service.PortName = d.str("flow.service.port_name")
	r.Service.UID = d.str("flow.service.uid")
	r.Service.Address = d.addr("flow.service.address")
	r.Service.Port = d.u16("flow.service.port")
	r.ProxySNATAddress = d.addr("flow.proxy_snat.address")
	r.ProxySNATPort = d.u16("flow.proxy_snat.port")
	d.policy(&ingressNames, &r.IngressPolicy)
	d.policy(&egressNames, &r.EgressPolicy)
	r.Egress.Name = d.str("flow.egress.name")
	r.Egress.UID = d.str("flow.egress.uid")
	r.Egress.Address = d.addr("flow.egress.address")
	r.Egress.NodeName = d.str("flow.egress.node.name")
	r.Egress.NodeUID = d.str("flow.egress.node.uid")
	r.Conntrack.ID = d.u32("flow.conntrack.id")
	r.Conntrack.Zone = d.u16("flow.conntrack.zone")
	r.Conntrack.Mark = d.u32("flow.conntrack.mark")
	switch n := d.u8("flow.conntrack.labels"); n {
	case 0:
	case 16:
		if s, ok := d.raw("flow.conntrack.labels", 16); ok {
			copy(r.Conntrack.Labels[:], s)
		}
	default:
		d.fail("flow.conntrack.labels", fmt.Sprintf("length %d, want 0 or 16", n))
	}
	r.Reporter.NodeName = d.str("flow.reporter.node.name")
	r.Reporter.Side = Side(d.enum("flow.reporter.side", sideNames))
	r.Direction = Direction(d.enum("flow.direction", directionNames))
	r.Correlation = CorrelationState(d.enum(AttrCorrelationState, correlationNames))
	r.Evicted = d.boolean("flow.correlation.evicted")
	r.Origin.ObservationDomainID = d.u32("flow.original_observation_domain_id")
	r.Origin.ExporterAddress = d.addr("flow.original_exporter.address")
	switch d.u8("flow.aggregation") {
	case 0:
		return
	case 1:
	default:
		d.fail("flow.aggregation", fmt.Sprintf("presence byte is %d, want 0 or 1", d.s[d.i-1]))
		return
	}
	a := &Aggregation{}
	r.Aggregation = a
	a.EndFromSource = d.time("flow.source_node.end")
	a.EndFromDestination = d.time("flow.destination_node.end")
	d.counters(&fromSourceNames, &a.StatsFromSource)
	d.counters(&reverseFromSourceNames, &a.ReverseStatsFromSource)
	d.counters(&fromDestinationNames, &a.StatsFromDestination)
	d.counters(&reverseFromDestinationNames, &a.ReverseStatsFromDestination)
	a.Throughput = d.uvarint("flow.throughput")
	a.ReverseThroughput = d.uvarint("flow.reverse.throughput")
	a.ThroughputFromSource = d.uvarint("flow.source_node.throughput")
	a.ReverseThroughputFromSource = d.uvarint("flow.source_node.reverse.throughput")
	a.ThroughputFromDestination = d.uvarint("flow.destination_node.throughput")
	a.ReverseThroughputFromDestination = d.uvarint("flow.destination_node.reverse.throughput")
}
