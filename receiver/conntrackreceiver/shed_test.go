package conntrackreceiver

import (
	"net/netip"
	"testing"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

func shedConn(port uint16, id uint32) store.Conn {
	return store.Conn{Key: store.Key{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: port, DstPort: 53, Proto: 17}, ID: id}
}

// countShed adds conns as one poll's shed connections and returns how many
// are counted.
func countShed(s *shedSet, complete bool, conns ...store.Conn) int {
	n := 0
	for i := range conns {
		if s.add(&conns[i]) {
			n++
		}
	}
	s.endPoll(complete)
	return n
}

func TestShedCountedOncePerConnection(t *testing.T) {
	s := newShedSet(100)
	a, b, c := shedConn(1, 1), shedConn(2, 2), shedConn(3, 3)
	if n := countShed(s, true, a, b); n != 2 {
		t.Fatalf("first poll counted %d, want 2", n)
	}
	if n := countShed(s, true, a, b, c); n != 1 {
		t.Fatalf("second poll counted %d, want 1 (only the new connection)", n)
	}
	// An abandoned poll that reached only a: b and c are still remembered.
	if n := countShed(s, false, a); n != 0 {
		t.Fatalf("abandoned poll counted %d, want 0", n)
	}
	if n := countShed(s, true, a, b, c); n != 0 {
		t.Fatalf("poll after the abandoned one counted %d, want 0", n)
	}
	// The same tuple with another conntrack entry is a new connection.
	if n := countShed(s, true, a, b, shedConn(3, 4)); n != 1 {
		t.Fatalf("reused tuple counted %d, want 1", n)
	}
	// A connection absent from a complete poll is forgotten.
	countShed(s, true, a)
	if n := countShed(s, true, a, b); n != 1 {
		t.Fatalf("returning connection counted %d, want 1", n)
	}
}

func TestShedMemoryBounded(t *testing.T) {
	s := newShedSet(2)
	if n := countShed(s, true, shedConn(1, 1), shedConn(2, 2), shedConn(3, 3)); n != 3 {
		t.Fatalf("counted %d, want 3", n)
	}
	if len(s.prev) != 2 {
		t.Fatalf("remembered %d, want the bound 2", len(s.prev))
	}
	// The one not remembered is counted again (over-counted, never lost).
	if n := countShed(s, true, shedConn(1, 1), shedConn(2, 2), shedConn(3, 3)); n != 1 {
		t.Fatalf("counted %d, want 1", n)
	}
}

// TestShedManyConnections: with the directory over a large set, each of
// 200k shed connections is counted once and each new one once.
func TestShedManyConnections(t *testing.T) {
	s := newShedSet(shedMemory)
	conns := make([]store.Conn, 200_000)
	for i := range conns {
		conns[i] = shedConn(uint16(i), uint32(i))
	}
	if n := countShed(s, true, conns...); n != len(conns) {
		t.Fatalf("first poll counted %d, want %d", n, len(conns))
	}
	for i := range 1000 {
		conns[i*7].ID += 1 << 20 // another entry under the same tuple
	}
	if n := countShed(s, true, conns...); n != 1000 {
		t.Fatalf("second poll counted %d, want the 1000 new entries", n)
	}
	if n := countShed(s, true, conns...); n != 0 {
		t.Fatalf("third poll counted %d, want 0", n)
	}
}
