package ctsource

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

func TestConvertMasqueradeAndDNAT(t *testing.T) {
	a := netip.MustParseAddr
	start := time.Unix(1_800_000_000, 5)
	f := conntrack.Flow{ID: 7, Zone: 65520, Mark: 0x42, Status: conntrack.StatusSeenReply,
		Timestamp:     conntrack.Timestamp{Start: start, Stop: start.Add(time.Second)},
		CountersOrig:  conntrack.Counter{Packets: 3, Bytes: 300},
		CountersReply: conntrack.Counter{Packets: 2, Bytes: 200},
		ProtoInfo:     conntrack.ProtoInfo{TCP: &conntrack.ProtoInfoTCP{State: 3}},
		Labels:        []byte{0x08, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0},
	}
	f.TupleOrig.IP.SourceAddress, f.TupleOrig.IP.DestinationAddress = a("10.0.1.2"), a("10.96.0.10")
	f.TupleOrig.Proto = conntrack.ProtoTuple{Protocol: 6, SourcePort: 40000, DestinationPort: 80}
	f.TupleReply.IP.SourceAddress, f.TupleReply.IP.DestinationAddress = a("10.0.2.2"), a("10.0.2.1")
	f.TupleReply.Proto = conntrack.ProtoTuple{Protocol: 6, SourcePort: 8080, DestinationPort: 40001}
	var c store.Conn
	Convert(&f, &c)
	if c.Src != a("10.0.1.2") || c.SrcPort != 40000 || c.Dst != a("10.0.2.2") || c.DstPort != 8080 || c.Proto != 6 ||
		c.OrigDst != a("10.96.0.10") || c.OrigDstPort != 80 || c.SNATAddr != a("10.0.2.1") || c.SNATPort != 40001 ||
		c.ID != 7 || c.Zone != 65520 || c.Mark != 0x42 || c.TCPState != 3 || c.Start != start.UnixNano() || c.Stop != 0 ||
		c.Orig != (store.Counters{Packets: 3, Bytes: 300}) || c.Reply != (store.Counters{Packets: 2, Bytes: 200}) {
		t.Fatalf("converted %+v", c)
	}
	if littleEndian && (c.Labels[15] != 0x08 || c.Labels[7] != 0x01) {
		t.Fatalf("labels %x, want big-endian (label bit 3 in byte 15, bit 64 in byte 7)", c.Labels)
	}

	// A symmetric reply (no SNAT) leaves SNAT unset; a dying entry has a stop time.
	f.TupleReply.IP.DestinationAddress, f.TupleReply.Proto.DestinationPort = a("10.0.1.2"), 40000
	f.Status |= conntrack.StatusDying
	f.ProtoInfo.TCP = nil
	f.TupleOrig.Proto.Protocol = 17
	Convert(&f, &c)
	if c.SNATAddr.IsValid() || c.SNATPort != 0 || c.Stop != start.Add(time.Second).UnixNano() || !c.Dying() {
		t.Fatalf("converted %+v", c)
	}
}
