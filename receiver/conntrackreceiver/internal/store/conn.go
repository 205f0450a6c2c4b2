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
// (the reply tuple's source) and the protocol — Antrea's ConnectionKey — plus,
// for ICMP and ICMPv6, the original tuple's type, code and identifier, which
// conntrack uses in place of ports: two concurrent pings between the same
// hosts are two connections.
type Key struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	ICMPID           uint16
	Proto            uint8
	ICMPType         uint8
	ICMPCode         uint8
}

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

// IsTCP reports whether the connection is TCP.
func (c *Conn) IsTCP() bool { return c.Proto == 6 }

// Dying reports whether conntrack says the connection is ending: TCP in
// TIME_WAIT or CLOSE, or another protocol with the DYING status bit. (A
// connection gone from the table is dying too; the store tracks that.)
func (c *Conn) Dying() bool {
	if c.IsTCP() {
		return c.TCPState == TCPTimeWait || c.TCPState == TCPClose
	}
	return c.Status&StatusDying != 0
}
