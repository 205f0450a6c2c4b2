package flowrecord

import (
	"crypto/sha256"
	"net/netip"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// CorrelationKey returns the key on which the gateway pairs the two halves of
// one connection (decision D3): protocol, source and destination as the
// connection crosses between the two Nodes, in its own direction, as
// "proto|src|dst" with addresses in their canonical text form (IPv4-mapped
// IPv6 unmapped, IPv6 ports in brackets):
//
//	6|10.10.0.5:43512|10.10.1.7:8080
//	17|[fd00:10:10::5]:5353|[fd00:10:10:1::7]:53
//	1|10.10.0.5:0|10.10.1.7:0|8/0/4660
//
// ICMP and ICMPv6 have no ports: conntrack tells their conversations apart by
// type, code and identifier, which the key appends as "|type/code/id".
//
// The rule: the source Node keys its half by the tuple after its own NAT (the
// packets leave it that way), the destination Node by the tuple before its own
// NAT (the packets arrive that way); so both see the same tuple whichever Node
// translated what:
//
//   - a source half SNATed on its Node (KeyedBySNAT) is keyed by the SNAT
//     address and port, its destination by the post-DNAT endpoint (a ClusterIP
//     translated on the source Node, or the ingress Node of a from-external
//     NodePort flow, Antrea's case);
//   - a destination half DNATed on its Node (KeyedByPreDNAT: a NodePort,
//     externalIP or LoadBalancer address of this Node reached from another
//     Node) is keyed by the pre-DNAT destination, as the source Node sent it;
//   - otherwise the tuple is the record's source and post-DNAT destination.
func (r *Record) CorrelationKey() string {
	src := netip.AddrPortFrom(r.Source.Address.Unmap(), r.Source.Port)
	dst := netip.AddrPortFrom(r.Destination.Address.Unmap(), r.Destination.Port)
	switch {
	case r.KeyedBySNAT():
		src = netip.AddrPortFrom(r.ProxySNATAddress.Unmap(), r.ProxySNATPort)
	case r.KeyedByPreDNAT():
		dst = netip.AddrPortFrom(r.OriginalDestinationAddress.Unmap(), r.OriginalDestinationPort)
	}
	b := make([]byte, 0, 104)
	b = strconv.AppendUint(b, uint64(r.Protocol), 10)
	b = append(b, '|')
	b = src.AppendTo(b)
	b = append(b, '|')
	b = dst.AppendTo(b)
	if r.Protocol == protocolICMP || r.Protocol == protocolICMPv6 {
		b = append(b, '|')
		b = strconv.AppendUint(b, uint64(r.ICMP.Type), 10)
		b = append(b, '/')
		b = strconv.AppendUint(b, uint64(r.ICMP.Code), 10)
		b = append(b, '/')
		b = strconv.AppendUint(b, uint64(r.ICMP.ID), 10)
	}
	return string(b)
}

// KeyedBySNAT reports whether r is a source half whose source was SNATed on
// the reporting Node, so that its correlation key uses the SNAT address and
// port: a record the reporter marks as the source side (or a relay leg, the
// source of its onward leg), with a SNAT address;
// or, for records without a side (from Antrea), Antrea's ingress-Node
// from-external predicate.
func (r *Record) KeyedBySNAT() bool {
	if !r.hasSNAT() {
		return false
	}
	switch r.Reporter.Side {
	case SideSource, SideRelay:
		return true
	case SideUnknown:
		return r.IsIngressNodeFromExternal()
	default:
		return false
	}
}

// KeyedByPreDNAT reports whether r is a destination half whose destination
// was DNATed on the reporting Node, so that its correlation key uses the
// pre-DNAT destination: the source Node sent the connection to this Node's
// NodePort (or an externalIP or LoadBalancer address routed here) and knows
// nothing of the endpoint this Node chose. Records without a side (from
// Antrea) keep Antrea's post-DNAT key.
func (r *Record) KeyedByPreDNAT() bool {
	return r.Reporter.Side == SideDestination && r.DNATed()
}

// DNATed reports whether the reporting Node's conntrack rewrote the
// destination: a pre-DNAT destination is set and differs from the endpoint
// (a pre-DNAT port of 0 is unknown, not a rewrite).
func (r *Record) DNATed() bool {
	o := r.OriginalDestinationAddress
	return o.IsValid() && !o.IsUnspecified() &&
		(o.Unmap() != r.Destination.Address.Unmap() ||
			(r.OriginalDestinationPort != 0 && r.OriginalDestinationPort != r.Destination.Port))
}

func (r *Record) hasSNAT() bool {
	return r.ProxySNATAddress.IsValid() && !r.ProxySNATAddress.IsUnspecified()
}

// IsIngressNodeFromExternal reports whether r is the ingress Node's half of a
// from-external flow that was SNATed on that Node: Antrea's
// "isSourceNodeFromExternal" (flow type FromExternal, proxy SNAT address set, and
// the destination Pod not known to the reporter). When the reporter says which
// side it is, that decides instead of the Pod name, because flowtel may know
// remote Pods.
func (r *Record) IsIngressNodeFromExternal() bool {
	if r.FlowType != FlowTypeFromExternal || !r.hasSNAT() {
		return false
	}
	switch r.Reporter.Side {
	case SideSource:
		return true
	case SideUnknown:
		return r.Destination.PodName == ""
	default:
		return false
	}
}

// KeyHash is the 16-byte hash of a correlation key, used as the LogRecord TraceID
// so that trace-ID routing and backends can group the halves of a connection.
func KeyHash(key string) pcommon.TraceID {
	sum := sha256.Sum256([]byte(key))
	var id pcommon.TraceID
	copy(id[:], sum[:16])
	return id
}
