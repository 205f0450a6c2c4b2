package ctsource

import (
	"encoding/binary"

	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// littleEndian: the kernel hands ct_label over as its in-memory bitmap, so on
// little-endian hosts the bytes are reversed to get Antrea's big-endian order.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// labels is a raw ct_label in Antrea's big-endian order.
func labels(raw []byte) (out [16]byte) {
	n := min(len(raw), 16)
	if littleEndian {
		for i := range n {
			out[15-i] = raw[i]
		}
	} else {
		copy(out[16-n:], raw[:n])
	}
	return out
}

// Convert fills c from a conntrack flow, the way Antrea reads entries: the
// source is the original tuple's, the destination the reply tuple's source
// (post-DNAT), the pre-DNAT destination the original tuple's destination, and
// the SNAT address/port the reply tuple's destination when it differs from
// the original source.
func Convert(f *conntrack.Flow, c *store.Conn) {
	o, r := &f.TupleOrig, &f.TupleReply
	*c = store.Conn{
		Key: store.Key{
			Src: o.IP.SourceAddress.Unmap(), Dst: r.IP.SourceAddress.Unmap(),
			SrcPort: o.Proto.SourcePort, DstPort: r.Proto.SourcePort,
			Proto: o.Proto.Protocol,
		},
		OrigDst:     o.IP.DestinationAddress.Unmap(),
		OrigDstPort: o.Proto.DestinationPort,
		ID:          f.ID,
		Zone:        f.Zone,
		Mark:        f.Mark,
		Status:      uint32(f.Status),
		Orig:        store.Counters{Packets: f.CountersOrig.Packets, Bytes: f.CountersOrig.Bytes},
		Reply:       store.Counters{Packets: f.CountersReply.Packets, Bytes: f.CountersReply.Bytes},
	}
	replyDstPort := r.Proto.DestinationPort
	if c.IsICMP() {
		// No ports: the type, code and identifier take their place, as in
		// the kernel's tuple (the reply's identifier is the SNATed one).
		c.SrcPort, c.DstPort = store.ICMPPorts(o.Proto.ICMPType, o.Proto.ICMPCode, o.Proto.ICMPID)
		c.OrigDstPort = c.DstPort
		replyDstPort = r.Proto.ICMPID
	}
	if rd := r.IP.DestinationAddress.Unmap(); rd != c.Src || replyDstPort != c.SrcPort {
		c.SNATAddr, c.SNATPort = rd, replyDstPort
	}
	if f.ProtoInfo.TCP != nil {
		c.TCPState = f.ProtoInfo.TCP.State
	}
	c.Labels = labels(f.Labels)
	if !f.Timestamp.Start.IsZero() {
		c.Start = f.Timestamp.Start.UnixNano()
	}
	if c.Status&store.StatusDying != 0 && !f.Timestamp.Stop.IsZero() {
		c.Stop = f.Timestamp.Stop.UnixNano()
	}
}
