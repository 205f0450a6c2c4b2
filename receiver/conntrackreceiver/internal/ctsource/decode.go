package ctsource

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/ti-mo/conntrack"
)

// Attribute numbers of a ctnetlink entry
// (include/uapi/linux/netfilter/nfnetlink_conntrack.h) that Convert and the
// NFLOG reader (NFULA_CT) read.
const (
	ctaTupleOrig     = 1
	ctaTupleReply    = 2
	ctaStatus        = 3
	ctaProtoInfo     = 4
	ctaMark          = 8
	ctaCountersOrig  = 9
	ctaCountersReply = 10
	ctaID            = 12
	ctaZone          = 18
	ctaTimestamp     = 20
	ctaLabels        = 22

	ctaTupleIP    = 1
	ctaTupleProto = 2

	ctaIPv4Src = 1
	ctaIPv4Dst = 2
	ctaIPv6Src = 3
	ctaIPv6Dst = 4

	ctaProtoNum        = 1
	ctaProtoSrcPort    = 2
	ctaProtoDstPort    = 3
	ctaProtoICMPID     = 4
	ctaProtoICMPType   = 5
	ctaProtoICMPCode   = 6
	ctaProtoICMPv6ID   = 7
	ctaProtoICMPv6Type = 8
	ctaProtoICMPv6Code = 9

	ctaProtoInfoTCP      = 1
	ctaProtoInfoTCPState = 1

	ctaCountersPackets = 1
	ctaCountersBytes   = 2

	ctaTimestampStart = 1
	ctaTimestampStop  = 2

	nfgenmsgLen = 4 // struct nfgenmsg, before the attributes
	nlaTypeMask = 0x3fff
)

// flowDecoder decodes the entries of a dump into one Flow it reuses, without
// allocating: only the attributes Convert reads are decoded, the others are
// skipped. ti-mo/conntrack's Event.Unmarshal, which it replaces on the dump
// path, allocated about 20 times per entry, which at a million entries per
// poll was a third of the poll's CPU (testbed/results.md).
type flowDecoder struct {
	f   conntrack.Flow
	tcp conntrack.ProtoInfoTCP
}

// decode decodes one IPCTNL_MSG_CT_NEW message's payload (after the netlink
// header). The flow and its Labels, which point into b, are valid until the
// next decode.
func (d *flowDecoder) decode(b []byte) (*conntrack.Flow, error) {
	if len(b) < nfgenmsgLen {
		return nil, fmt.Errorf("conntrack entry of %d bytes, shorter than its header", len(b))
	}
	d.f = conntrack.Flow{}
	f := &d.f
	err := eachAttr(b[nfgenmsgLen:], func(typ uint16, v []byte) (err error) {
		switch typ {
		case ctaTupleOrig:
			return decodeTuple(v, &f.TupleOrig)
		case ctaTupleReply:
			return decodeTuple(v, &f.TupleReply)
		case ctaStatus:
			var s uint32
			s, err = be32(typ, v)
			f.Status = conntrack.Status(s)
		case ctaProtoInfo:
			return d.decodeProtoInfo(v)
		case ctaMark:
			f.Mark, err = be32(typ, v)
		case ctaCountersOrig:
			return decodeCounters(v, &f.CountersOrig)
		case ctaCountersReply:
			return decodeCounters(v, &f.CountersReply)
		case ctaID:
			f.ID, err = be32(typ, v)
		case ctaZone:
			f.Zone, err = be16(typ, v)
		case ctaTimestamp:
			return decodeTimestamp(v, f)
		case ctaLabels:
			f.Labels = v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func decodeTuple(b []byte, t *conntrack.Tuple) error {
	return eachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case ctaTupleIP:
			return eachAttr(v, func(typ uint16, v []byte) error { return decodeAddr(&t.IP, typ, v) })
		case ctaTupleProto:
			return decodeProtoTuple(v, &t.Proto)
		}
		return nil
	})
}

// decodeAddr reads one address attribute of an IP tuple.
func decodeAddr(t *conntrack.IPTuple, typ uint16, v []byte) error {
	var addr netip.Addr
	switch {
	case (typ == ctaIPv4Src || typ == ctaIPv4Dst) && len(v) == 4:
		addr = netip.AddrFrom4([4]byte(v))
	case (typ == ctaIPv6Src || typ == ctaIPv6Dst) && len(v) == 16:
		addr = netip.AddrFrom16([16]byte(v))
	default:
		return fmt.Errorf("address attribute %d of %d bytes", typ, len(v))
	}
	if typ == ctaIPv4Src || typ == ctaIPv6Src {
		t.SourceAddress = addr
	} else {
		t.DestinationAddress = addr
	}
	return nil
}

func decodeProtoTuple(b []byte, t *conntrack.ProtoTuple) error {
	return eachAttr(b, func(typ uint16, v []byte) (err error) {
		switch typ {
		case ctaProtoNum:
			t.Protocol, err = u8(typ, v)
		case ctaProtoSrcPort:
			t.SourcePort, err = be16(typ, v)
		case ctaProtoDstPort:
			t.DestinationPort, err = be16(typ, v)
		case ctaProtoICMPID, ctaProtoICMPv6ID:
			t.ICMPID, err = be16(typ, v)
		case ctaProtoICMPType, ctaProtoICMPv6Type:
			t.ICMPType, err = u8(typ, v)
		case ctaProtoICMPCode, ctaProtoICMPv6Code:
			t.ICMPCode, err = u8(typ, v)
		}
		return err
	})
}

// decodeProtoInfo reads the TCP state (the only protocol information Convert
// uses) into the decoder's ProtoInfoTCP.
func (d *flowDecoder) decodeProtoInfo(b []byte) error {
	return eachAttr(b, func(typ uint16, v []byte) error {
		if typ != ctaProtoInfoTCP {
			return nil
		}
		d.tcp = conntrack.ProtoInfoTCP{}
		d.f.ProtoInfo.TCP = &d.tcp
		return eachAttr(v, func(typ uint16, v []byte) (err error) {
			if typ == ctaProtoInfoTCPState {
				d.tcp.State, err = u8(typ, v)
			}
			return err
		})
	})
}

func decodeCounters(b []byte, c *conntrack.Counter) error {
	return eachAttr(b, func(typ uint16, v []byte) (err error) {
		switch typ {
		case ctaCountersPackets:
			c.Packets, err = be64(typ, v)
		case ctaCountersBytes:
			c.Bytes, err = be64(typ, v)
		}
		return err
	})
}

func decodeTimestamp(b []byte, f *conntrack.Flow) error {
	return eachAttr(b, func(typ uint16, v []byte) error {
		if typ != ctaTimestampStart && typ != ctaTimestampStop {
			return nil
		}
		ns, err := be64(typ, v)
		if typ == ctaTimestampStart {
			f.Timestamp.Start = time.Unix(0, int64(ns))
		} else {
			f.Timestamp.Stop = time.Unix(0, int64(ns))
		}
		return err
	})
}

// eachAttr hands each netlink attribute (struct nlattr) of b to fn: its
// type, flags masked off, and its value.
func eachAttr(b []byte, fn func(typ uint16, v []byte) error) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("netlink attribute truncated (%d bytes left)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < 4 || l > len(b) {
			return fmt.Errorf("malformed netlink attribute (length %d, %d bytes left)", l, len(b))
		}
		if err := fn(binary.NativeEndian.Uint16(b[2:4])&nlaTypeMask, b[4:l:l]); err != nil {
			return err
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return nil
}

func u8(typ uint16, v []byte) (uint8, error) {
	if len(v) != 1 {
		return 0, attrSizeError(typ, v, 1)
	}
	return v[0], nil
}

func be16(typ uint16, v []byte) (uint16, error) {
	if len(v) != 2 {
		return 0, attrSizeError(typ, v, 2)
	}
	return binary.BigEndian.Uint16(v), nil
}

func be32(typ uint16, v []byte) (uint32, error) {
	if len(v) != 4 {
		return 0, attrSizeError(typ, v, 4)
	}
	return binary.BigEndian.Uint32(v), nil
}

func be64(typ uint16, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, attrSizeError(typ, v, 8)
	}
	return binary.BigEndian.Uint64(v), nil
}

func attrSizeError(typ uint16, v []byte, want int) error {
	return fmt.Errorf("netlink attribute %d of %d bytes (want %d)", typ, len(v), want)
}
