package ctsource

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/netfilter"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/deny"
)

// tuple encodes a ctnetlink tuple as the kernel nests it.
func tuple(ae *netlink.AttributeEncoder, typ uint16, src, dst string, sport, dport uint16) {
	ae.Nested(typ, func(t *netlink.AttributeEncoder) error {
		t.Nested(ctaTupleIP, func(ip *netlink.AttributeEncoder) error {
			s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
			if s.Is4() {
				ip.Bytes(ctaIPv4Dst-1, s.AsSlice())
				ip.Bytes(ctaIPv4Dst, d.AsSlice())
			} else {
				ip.Bytes(ctaIPv6Dst-1, s.AsSlice())
				ip.Bytes(ctaIPv6Dst, d.AsSlice())
			}
			return nil
		})
		t.Nested(ctaTupleProto, func(p *netlink.AttributeEncoder) error {
			p.Uint8(1, 6) // CTA_PROTO_NUM
			p.Uint16(ctaProtoDstPort-1, sport)
			p.Uint16(ctaProtoDstPort, dport)
			return nil
		})
		return nil
	})
}

// loggedMessage builds an NFLOG packet message as nfnetlink_log sends it:
// packet header, prefix, payload, sequence number and the conntrack entry of
// a connection to a ClusterIP that DNAT sent to a Pod.
func loggedMessage(t *testing.T, group uint16, withCT bool) netlink.Message {
	t.Helper()
	ae := netfilter.NewAttributeEncoder()
	ae.Bytes(nflogAttrPacketHdr, []byte{0x08, 0x00, 2, 0}) // IPv4, NF_INET_FORWARD
	ae.Bytes(nflogAttrPrefix, append([]byte("reject egress"), 0))
	ae.Bytes(nflogAttrPayload, []byte{0x45, 0, 0, 60})
	ae.Uint32(nflogAttrSeq, 41)
	if withCT {
		ae.Nested(nflogAttrCT, func(ct *netlink.AttributeEncoder) error {
			tuple(ct, ctaTupleOrig, "10.0.1.5", "10.96.0.10", 40000, 80)
			tuple(ct, 2, "10.0.2.7", "10.0.1.5", 8080, 40000) // CTA_TUPLE_REPLY: the DNAT
			ct.Uint32(ctaMark, 0x4000)
			ct.Uint16(ctaZone, 7)
			labels := make([]byte, 16)
			labels[0] = 1 // bit 0 of the kernel's bitmap
			ct.Bytes(ctaLabels, labels)
			return nil
		})
	}
	m, err := netfilter.EncodeNetlink(netfilter.Header{SubsystemID: netfilter.NFSubsysULOG, MessageType: nflogMsgPacket, Family: netfilter.ProtoIPv4, ResourceID: group}, ae)
	require.NoError(t, err)
	return m
}

func TestParseLoggedPacket(t *testing.T) {
	n := &NFLOG{group: 33}
	var p LoggedPacket
	require.True(t, n.parse(loggedMessage(t, 33, true), &p))
	wantLabels := [16]byte{15: 1} // Antrea's big-endian order (on a little-endian host)
	if !littleEndian {
		wantLabels = [16]byte{0: 1}
	}
	require.Equal(t, LoggedPacket{
		HWProtocol: 0x0800, Payload: []byte{0x45, 0, 0, 60}, Prefix: []byte("reject egress"), Seq: 41, HasSeq: true,
		CT:    deny.Conntrack{OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 80, Zone: 7, Mark: 0x4000, Labels: wantLabels},
		HasCT: true,
	}, p)

	require.True(t, n.parse(loggedMessage(t, 33, false), &p))
	require.False(t, p.HasCT, "a kernel without the conntrack glue sends none")
	require.Equal(t, uint32(41), p.Seq)

	require.False(t, n.parse(loggedMessage(t, 34, true), &p), "another group's packet")
	other := loggedMessage(t, 33, false)
	other.Header.Type = netlink.HeaderType(uint16(netfilter.NFSubsysULOG)<<8 | uint16(nflogMsgConfig))
	require.False(t, n.parse(other, &p), "not a packet message")
	require.False(t, n.parse(netlink.Message{Data: []byte{1}}, &p), "too short")
}
