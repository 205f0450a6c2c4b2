package ctsource

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// entryMessage is an IPCTNL_MSG_CT_NEW message as a dump carries it: both
// tuples, status, TCP protocol information (state and the attributes the
// decoder skips), counters, ID, zone, mark, timestamps, labels, and
// attributes Convert does not read.
func entryMessage(t *testing.T, proto uint8, orig, reply [4]netip.Addr, ports [4]uint16) netlink.Message {
	t.Helper()
	a := func(typ uint16, data []byte) netfilter.Attribute { return netfilter.Attribute{Type: typ, Data: data} }
	nest := func(typ uint16, children ...netfilter.Attribute) netfilter.Attribute {
		return netfilter.Attribute{Type: typ, Nested: true, Children: children}
	}
	ip := func(src, dst netip.Addr) netfilter.Attribute {
		if src.Is4() {
			return nest(ctaTupleIP, a(ctaIPv4Src, src.AsSlice()), a(ctaIPv4Dst, dst.AsSlice()))
		}
		return nest(ctaTupleIP, a(ctaIPv6Src, src.AsSlice()), a(ctaIPv6Dst, dst.AsSlice()))
	}
	protoTuple := func(sp, dp uint16) netfilter.Attribute {
		switch proto {
		case store.ProtoICMP:
			return nest(ctaTupleProto, a(ctaProtoNum, []byte{proto}), a(ctaProtoICMPID, netfilter.Uint16Bytes(sp)),
				a(ctaProtoICMPType, []byte{8}), a(ctaProtoICMPCode, []byte{0}))
		case store.ProtoICMPv6:
			return nest(ctaTupleProto, a(ctaProtoNum, []byte{proto}), a(ctaProtoICMPv6ID, netfilter.Uint16Bytes(sp)),
				a(ctaProtoICMPv6Type, []byte{128}), a(ctaProtoICMPv6Code, []byte{0}))
		}
		return nest(ctaTupleProto, a(ctaProtoNum, []byte{proto}), a(ctaProtoSrcPort, netfilter.Uint16Bytes(sp)),
			a(ctaProtoDstPort, netfilter.Uint16Bytes(dp)))
	}
	counters := func(typ uint16, p, b uint64) netfilter.Attribute {
		return nest(typ, a(ctaCountersPackets, netfilter.Uint64Bytes(p)), a(ctaCountersBytes, netfilter.Uint64Bytes(b)))
	}
	attrs := []netfilter.Attribute{
		nest(ctaTupleOrig, ip(orig[0], orig[1]), protoTuple(ports[0], ports[1])),
		nest(ctaTupleReply, ip(reply[0], reply[1]), protoTuple(ports[2], ports[3]), a(3, netfilter.Uint16Bytes(7))),
		a(ctaStatus, netfilter.Uint32Bytes(uint32(conntrack.StatusSeenReply|conntrack.StatusDying|conntrack.StatusDstNAT))),
		a(ctaMark, netfilter.Uint32Bytes(0x42)),
		counters(ctaCountersOrig, 3, 300),
		counters(ctaCountersReply, 2, 200),
		a(11, netfilter.Uint32Bytes(1)), // CTA_USE
		a(ctaID, netfilter.Uint32Bytes(0xdeadbeef)),
		a(ctaZone, netfilter.Uint16Bytes(65520)),
		nest(ctaTimestamp, a(ctaTimestampStart, netfilter.Uint64Bytes(1_800_000_000_000_000_005)),
			a(ctaTimestampStop, netfilter.Uint64Bytes(1_800_000_001_000_000_005))),
		a(ctaLabels, []byte{0x08, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0}),
		a(7, netfilter.Uint32Bytes(120)), // CTA_TIMEOUT
	}
	if proto == store.ProtoTCP {
		attrs = append(attrs, nest(ctaProtoInfo, nest(ctaProtoInfoTCP, a(ctaProtoInfoTCPState, []byte{3}),
			a(2, []byte{7}), a(3, []byte{7}), a(4, []byte{0x23, 0}), a(5, []byte{0x23, 0}))))
	}
	m, err := netfilter.MarshalNetlink(netfilter.Header{SubsystemID: netfilter.NFSubsysCTNetlink, MessageType: 0, Family: netfilter.ProtoIPv4}, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDecodeAsTheLibrary: the dump decoder and ti-mo/conntrack's Event
// decoder, each followed by Convert, give the same connection.
func TestDecodeAsTheLibrary(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name        string
		proto       uint8
		orig, reply [4]netip.Addr
		ports       [4]uint16
	}{
		{"tcp DNAT and SNAT", store.ProtoTCP, [4]netip.Addr{a("10.0.1.2"), a("10.96.0.10")}, [4]netip.Addr{a("10.0.2.2"), a("10.0.2.1")}, [4]uint16{40000, 80, 8080, 40001}},
		{"udp v6", 17, [4]netip.Addr{a("fd01::2"), a("fd02::2")}, [4]netip.Addr{a("fd02::2"), a("fd01::2")}, [4]uint16{5353, 53, 53, 5353}},
		{"udp v4-mapped", 17, [4]netip.Addr{a("::ffff:10.0.0.1"), a("::ffff:10.0.0.2")}, [4]netip.Addr{a("::ffff:10.0.0.2"), a("::ffff:10.0.0.1")}, [4]uint16{1, 2, 2, 1}},
		{"icmp", store.ProtoICMP, [4]netip.Addr{a("10.0.1.2"), a("10.0.2.2")}, [4]netip.Addr{a("10.0.2.2"), a("10.0.2.1")}, [4]uint16{77, 0, 78, 0}},
		{"icmpv6", store.ProtoICMPv6, [4]netip.Addr{a("fd01::2"), a("fd02::2")}, [4]netip.Addr{a("fd02::2"), a("fd01::2")}, [4]uint16{9, 0, 9, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := entryMessage(t, tc.proto, tc.orig, tc.reply, tc.ports)
			var ev conntrack.Event
			if err := ev.Unmarshal(m); err != nil {
				t.Fatal(err)
			}
			var want, got store.Conn
			Convert(ev.Flow, &want)
			var d flowDecoder
			f, err := d.decode(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			Convert(f, &got)
			if got != want {
				t.Fatalf("decoded\n%+v\nthe library\n%+v", got, want)
			}
			if got.Zone != 65520 || got.Labels == ([16]byte{}) || got.Stop == 0 || got.Reply.Bytes != 200 || (tc.proto == store.ProtoTCP) != (got.TCPState == 3) {
				t.Fatalf("attributes missing in %+v", got)
			}
			// Reused for the next entry: nothing of this one is left over.
			m2 := entryMessage(t, 17, [4]netip.Addr{a("10.9.0.1"), a("10.9.0.2")}, [4]netip.Addr{a("10.9.0.2"), a("10.9.0.1")}, [4]uint16{1, 2, 2, 1})
			var ev2 conntrack.Event
			if err := ev2.Unmarshal(m2); err != nil {
				t.Fatal(err)
			}
			Convert(ev2.Flow, &want)
			if f, err = d.decode(m2.Data); err != nil {
				t.Fatal(err)
			}
			Convert(f, &got)
			if got != want {
				t.Fatalf("second entry decoded\n%+v\nthe library\n%+v", got, want)
			}
		})
	}
}

// TestDecodeMalformed: every truncation of an entry (its attributes keep
// their lengths, the message is cut) is an error or a shorter entry, never
// a panic; attributes of the wrong size are errors.
func TestDecodeMalformed(t *testing.T) {
	a := netip.MustParseAddr
	m := entryMessage(t, store.ProtoTCP, [4]netip.Addr{a("10.0.1.2"), a("10.96.0.10")}, [4]netip.Addr{a("10.0.2.2"), a("10.0.2.1")}, [4]uint16{40000, 80, 8080, 40001})
	var d flowDecoder
	errs := 0
	for n := range len(m.Data) {
		if _, err := d.decode(m.Data[:n]); err != nil {
			errs++
		}
	}
	if errs == 0 {
		t.Fatal("no truncation was an error")
	}
	for _, bad := range [][]byte{
		{0, 0, 0, 0, 8, 0, ctaID, 0, 1, 2, 3},                                                              // length past the end
		{0, 0, 0, 0, 7, 0, ctaID, 0, 1, 2, 3, 0},                                                           // CTA_ID of 3 bytes
		{0, 0, 0, 0, 6, 0, ctaZone, 0, 1, 2, 0, 0, 2, 0},                                                   // then an attribute of 2 bytes
		{0, 0, 0, 0, 16, 0, ctaTupleOrig, 0x80, 12, 0, ctaTupleIP, 0x80, 5, 0, ctaIPv4Src, 0, 10, 0, 0, 0}, // an address of 1 byte
	} {
		if _, err := d.decode(bad); err == nil {
			t.Errorf("%x decoded without an error", bad)
		}
	}
}

// TestDecodeAllocatesNothing: decoding an entry allocates nothing.
func TestDecodeAllocatesNothing(t *testing.T) {
	a := netip.MustParseAddr
	m := entryMessage(t, store.ProtoTCP, [4]netip.Addr{a("fd01::2"), a("fd02::2")}, [4]netip.Addr{a("fd02::2"), a("fd01::2")}, [4]uint16{1, 2, 2, 1})
	var d flowDecoder
	var c store.Conn
	if n := testing.AllocsPerRun(100, func() {
		f, err := d.decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		Convert(f, &c)
	}); n != 0 {
		t.Fatalf("%v allocations per entry", n)
	}
}
