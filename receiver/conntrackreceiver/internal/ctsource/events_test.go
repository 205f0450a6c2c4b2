package ctsource

import (
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"
)

// TestEventsParseOnlyDestroy: of the messages of a datagram, only ctnetlink
// DELETE messages (DESTROY events) are decoded and converted, in order.
func TestEventsParseOnlyDestroy(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	msg := func(subsys netfilter.SubsystemID, typ uint16, port uint16) []byte {
		m := entryMessage(t, 17, [4]netip.Addr{a, b}, [4]netip.Addr{b, a}, [4]uint16{port, 53, 53, port})
		m.Header.Type = netlink.HeaderType(uint16(subsys)<<8 | typ)
		return wire(t, m, 0)
	}
	var dgram []byte
	dgram = append(dgram, msg(netfilter.NFSubsysCTNetlink, 0, 1)...)           // NEW
	dgram = append(dgram, msg(netfilter.NFSubsysCTNetlink, ctDelete, 2)...)    // DESTROY
	dgram = append(dgram, msg(netfilter.NFSubsysCTNetlinkExp, ctDelete, 3)...) // an expectation's
	dgram = append(dgram, msg(netfilter.NFSubsysCTNetlink, ctDelete, 4)...)    // DESTROY
	var e Events
	if err := e.parse(dgram); err != nil {
		t.Fatal(err)
	}
	if len(e.conns) != 2 || e.conns[0].SrcPort != 2 || e.conns[1].SrcPort != 4 {
		t.Fatalf("got %+v, want the DESTROY events from ports 2 and 4", e.conns)
	}
	c := e.conns[0]
	if c.Src != a || c.Dst != b || c.DstPort != 53 || c.Proto != 17 || c.Orig.Packets != 3 || c.Orig.Bytes != 300 ||
		c.Reply.Packets != 2 || c.ID != 0xdeadbeef || c.Zone != 65520 || c.Mark != 0x42 || c.Stop == 0 {
		t.Fatalf("converted event %+v does not carry the message's tuple, counters, id, zone, mark and stop time", c)
	}
	e.conns = e.conns[:0]
	if err := e.parse(dgram[:len(dgram)-8]); err == nil {
		t.Fatal("a datagram cut short parsed without an error")
	}
}
