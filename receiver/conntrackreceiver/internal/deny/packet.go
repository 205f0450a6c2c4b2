// Package deny keeps denied connections: packets a netfilter rule dropped or
// rejected and logged to an NFLOG group, accumulated into one record per
// 5-tuple with the semantics of Antrea's deny connection store (packets and
// bytes summed, exported once idle, reverse counters 0, end of flow), bounded
// in count and in packet rate.
package deny

import (
	"encoding/binary"
	"net/netip"
)

// Key is a denied connection's 5-tuple as the logged packet carried it; for
// ICMP and ICMPv6 also the type, code and (echo) identifier, as conntrack
// tells ICMP conversations apart.
type Key struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
	ICMPType         uint8
	ICMPCode         uint8
	ICMPID           uint16
}

const (
	protoICMP   = 1
	protoICMPv6 = 58
)

// parse reads the key and the IP length (the packet's bytes on the wire from
// the network header on, as Antrea counts a denied packet) from a packet cut
// at the copy range. ok is false for anything but a well-formed IPv4 or IPv6
// header.
func parse(b []byte) (k Key, length uint64, ok bool) {
	if len(b) < 1 {
		return k, 0, false
	}
	var l4 []byte
	fragment := false
	switch b[0] >> 4 {
	case 4:
		ihl := int(b[0]&0x0f) * 4
		if len(b) < 20 || ihl < 20 || len(b) < ihl {
			return k, 0, false
		}
		length = uint64(binary.BigEndian.Uint16(b[2:4]))
		k.Proto = b[9]
		k.Src = netip.AddrFrom4([4]byte(b[12:16]))
		k.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		fragment = binary.BigEndian.Uint16(b[6:8])&0x1fff != 0
		l4 = b[ihl:]
	case 6:
		if len(b) < 40 {
			return k, 0, false
		}
		length = 40 + uint64(binary.BigEndian.Uint16(b[4:6]))
		k.Src = netip.AddrFrom16([16]byte(b[8:24]))
		k.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		k.Proto, l4, fragment = skipIPv6Extensions(b[6], b[40:])
	default:
		return k, 0, false
	}
	if fragment {
		return k, length, true // a later fragment: no transport header
	}
	switch k.Proto {
	case protoICMP, protoICMPv6:
		if len(l4) >= 2 {
			k.ICMPType, k.ICMPCode = l4[0], l4[1]
			if isEcho(k.Proto, k.ICMPType) && len(l4) >= 6 {
				k.ICMPID = binary.BigEndian.Uint16(l4[4:6])
			}
		}
	default:
		if hasPorts(k.Proto) && len(l4) >= 4 {
			k.SrcPort = binary.BigEndian.Uint16(l4[0:2])
			k.DstPort = binary.BigEndian.Uint16(l4[2:4])
		}
	}
	return k, length, true
}

// skipIPv6Extensions walks the extension headers that can precede the
// transport header; fragment says the packet is a later fragment.
func skipIPv6Extensions(next uint8, b []byte) (proto uint8, l4 []byte, fragment bool) {
	for {
		var n int
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(b) < 2 {
				return next, nil, false
			}
			n = (int(b[1]) + 1) * 8
		case 44: // fragment
			if len(b) < 8 {
				return next, nil, false
			}
			if binary.BigEndian.Uint16(b[2:4])&0xfff8 != 0 {
				return b[0], nil, true
			}
			n = 8
		case 51: // authentication header
			if len(b) < 2 {
				return next, nil, false
			}
			n = (int(b[1]) + 2) * 4
		default:
			return next, b, false
		}
		if len(b) < n {
			return b[0], nil, false
		}
		next, b = b[0], b[n:]
	}
}

// hasPorts: TCP, UDP, DCCP, SCTP and UDP-Lite start with the two ports.
func hasPorts(proto uint8) bool {
	switch proto {
	case 6, 17, 33, 132, 136:
		return true
	}
	return false
}

// isEcho: echo request and reply carry an identifier.
func isEcho(proto, typ uint8) bool {
	if proto == protoICMP {
		return typ == 8 || typ == 0
	}
	return typ == 128 || typ == 129
}
