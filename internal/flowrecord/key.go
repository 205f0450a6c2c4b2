package flowrecord

import (
	"crypto/sha256"
	"net/netip"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// CorrelationKey returns the key on which the gateway pairs the two halves of
// one connection (DESIGN D3): protocol, source and destination as they travel
// between the two Nodes, in the connection's own direction, as "proto|src|dst"
// with addresses in their canonical text form (IPv4-mapped IPv6 unmapped, IPv6
// ports in brackets):
//
//	6|10.10.0.5:43512|10.10.1.7:8080
//	17|[fd00:10:10::5]:5353|[fd00:10:10:1::7]:53
//	1|10.10.0.5:0|10.10.1.7:0|8/0/4660
//
// ICMP and ICMPv6 have no ports: conntrack tells their conversations apart by
// type, code and identifier, which the key appends as "|type/code/id".
//
// The destination is the post-DNAT endpoint, which both halves report. The
// source is the original source, except when the source Node SNATed the
// connection (KeyedBySNAT): then the destination Node only ever sees the SNAT
// address and port, so the source half is keyed by those. This is Antrea's
// substitution for the ingress Node's half of a from-external flow (NodePort
// with externalTrafficPolicy Cluster), extended to every SNATed source half,
// such as a host → ClusterIP connection masqueraded by the proxy (seed 000).
func (r *Record) CorrelationKey() string {
	src := netip.AddrPortFrom(r.Source.Address.Unmap(), r.Source.Port)
	if r.KeyedBySNAT() {
		src = netip.AddrPortFrom(r.ProxySNATAddress.Unmap(), r.ProxySNATPort)
	}
	dst := netip.AddrPortFrom(r.Destination.Address.Unmap(), r.Destination.Port)
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
// port: a record the reporter marks as the source side, with a SNAT address;
// or, for records without a side (from Antrea), Antrea's ingress-Node
// from-external predicate.
func (r *Record) KeyedBySNAT() bool {
	if !r.hasSNAT() {
		return false
	}
	switch r.Reporter.Side {
	case SideSource:
		return true
	case SideUnknown:
		return r.IsIngressNodeFromExternal()
	default:
		return false
	}
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
