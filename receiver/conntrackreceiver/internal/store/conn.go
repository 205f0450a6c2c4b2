// Package store is the conntrack receiver's connection store: it turns
// successive conntrack dumps into export events with Antrea's semantics
// (active/idle expiry, deltas since the last export, end reasons, dying
// detection, frozen dying entries, stale removal), plus one improvement: a
// connection that went idle and then vanished still gets a final record.
//
// The store is not safe for concurrent use; the receiver's poll loop owns it.
package store

import "net/netip"

// Key identifies a connection: the original source, the post-DNAT destination
// (the reply tuple's source) and the protocol. It is Antrea's ConnectionKey,
// with one addition: ICMP and ICMPv6 have no ports, and conntrack tells their
// conversations apart by the original type, code and identifier, which the key
// holds where the kernel's tuple does — the identifier in SrcPort, type<<8 |
// code in DstPort (see ICMP) — so that two concurrent pings between the same
// hosts are two connections, at no cost to the key's size.
type Key struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
}

// IsICMP reports whether the key is an ICMP or ICMPv6 conversation.
func (k *Key) IsICMP() bool { return k.Proto == ProtoICMP || k.Proto == ProtoICMPv6 }

// ICMP returns the type, code and identifier of an ICMP or ICMPv6 key.
func (k *Key) ICMP() (typ, code uint8, id uint16) {
	return uint8(k.DstPort >> 8), uint8(k.DstPort), k.SrcPort
}

// ICMPPorts returns what the key holds in its ports for an ICMP or ICMPv6
// conversation of the given type, code and identifier.
func ICMPPorts(typ, code uint8, id uint16) (src, dst uint16) {
	return id, uint16(typ)<<8 | uint16(code)
}

// IANA protocol numbers with a meaning for the store.
const (
	ProtoICMP   uint8 = 1
	ProtoTCP    uint8 = 6
	ProtoICMPv6 uint8 = 58
)

// TCP states as conntrack numbers them (include/uapi/linux/netfilter/nf_conntrack_tcp.h).
const (
	TCPNone        uint8 = 0
	TCPSynSent     uint8 = 1
	TCPSynRecv     uint8 = 2
	TCPEstablished uint8 = 3
	TCPFinWait     uint8 = 4
	TCPCloseWait   uint8 = 5
	TCPLastAck     uint8 = 6
	TCPTimeWait    uint8 = 7
	TCPClose       uint8 = 8
	TCPSynSent2    uint8 = 9
)

var tcpStateNames = [...]string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT",
	"CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

// TCPStateName returns conntrack's name of a TCP state ("" above SYN_SENT2),
// the strings Antrea exports.
func TCPStateName(s uint8) string {
	if int(s) < len(tcpStateNames) {
		return tcpStateNames[s]
	}
	return ""
}

// StatusDying is conntrack's IPS_DYING status bit.
const StatusDying uint32 = 1 << 9

// Counters are one direction's cumulative packet and byte counters.
type Counters struct {
	Packets, Bytes uint64
}

// Conn is one conntrack entry, reduced to what a flow record needs. It is
// compact and pointer-free so that a dump of 100k entries costs little.
type Conn struct {
	Key
	// OrigDst/OrigDstPort are the pre-DNAT destination (the original tuple's destination).
	OrigDst     netip.Addr
	OrigDstPort uint16
	// SNATAddr/SNATPort are the reply tuple's destination when it differs from
	// the original source (SNAT on this hop); invalid/0 otherwise.
	SNATAddr netip.Addr
	SNATPort uint16

	ID     uint32
	Zone   uint16
	Mark   uint32
	Status uint32
	// TCPState is the conntrack TCP state; only meaningful when Key.Proto is TCP.
	TCPState uint8
	// Labels is ct_label in big-endian order (Antrea's).
	Labels [16]byte

	// Start is the conntrack start timestamp and Stop the stop timestamp of a
	// dying entry, in Unix nanoseconds; 0 when unknown (timestamps off, or alive).
	Start, Stop int64

	Orig, Reply Counters
}

// Counted reports whether conntrack counts the connection's packets: the
// original direction holds at least the packet that created the entry. An
// entry created while nf_conntrack_acct was off has no counters (nor one
// inserted by hand, e.g. conntrack -I).
func (c *Conn) Counted() bool { return c.Orig.Packets > 0 }

// IsTCP reports whether the connection is TCP.
func (c *Conn) IsTCP() bool { return c.Proto == ProtoTCP }

// Dying reports whether conntrack says the connection is ending: TCP in
// TIME_WAIT or CLOSE, or another protocol with the DYING status bit. (A
// connection gone from the table is dying too; the store tracks that.)
func (c *Conn) Dying() bool {
	if c.IsTCP() {
		return c.TCPState == TCPTimeWait || c.TCPState == TCPClose
	}
	return c.Status&StatusDying != 0
}
