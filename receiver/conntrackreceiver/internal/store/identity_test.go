package store

import (
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Which conntrack entry is which connection: tuple reuse, zone moves, dumps
// that miss an entry, and DESTROY events racing with dumps.

func withID(c Conn, id uint32) Conn { c.ID = id; return c }

func TestTupleReuseByALiveEntryEndsTheOldConnectionAndStartsANewOne(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, withID(tcpConn(1000, 10, TCPEstablished), 1))
	one(t, c.poll(5*time.Second, withID(tcpConn(1000, 10, TCPEstablished), 1)))
	c.poll(6*time.Second, withID(tcpConn(1000, 12, TCPEstablished), 1))
	// The kernel dropped entry 1 and a new connection took the tuple between
	// two polls (UDP timeout, SYN on TIME_WAIT): the dump shows entry 2.
	second := withID(tcpConn(1000, 3, TCPSynSent), 2)
	second.Start = t0.Add(7 * time.Second).UnixNano()
	x := one(t, c.poll(8*time.Second, second))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.ID != 1 || x.Conn.Orig.Packets != 12 || x.OrigDelta.Packets != 2 ||
		!x.End.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("got %+v, want the old connection's end-of-flow with its own last counters, ending when last seen", x)
	}
	second.Orig.Packets, second.TCPState = 5, TCPEstablished
	x = one(t, c.poll(13*time.Second, second))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.Conn.ID != 2 || x.OrigDelta.Packets != 5 || !x.Start.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("got %+v, want the new connection's first record with its own start and counters", x)
	}
	if c.s.Len() != 1 || c.s.Queued() != 1 {
		t.Fatalf("held %d queued %d, want the new connection only", c.s.Len(), c.s.Queued())
	}
}

func TestTupleReuseWithTheSameIDIsToldApartByTheStartTime(t *testing.T) {
	// The kernel's ID is a hash: an entry reusing the memory of the one it
	// replaced on the same tuple gets the same ID.
	c := &clock{t: t, s: newTestStore()}
	old := tcpConn(1000, 10, TCPEstablished)
	old.Start = t0.UnixNano()
	c.poll(0, old)
	again := tcpConn(1000, 2, TCPEstablished)
	again.Start = t0.Add(3 * time.Second).UnixNano()
	x := one(t, c.poll(4*time.Second, again))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.Orig.Packets != 10 || !x.Start.Equal(t0) {
		t.Fatalf("got %+v, want the old connection's end", x)
	}
	if got := c.s.Final(&old, t0.Add(4500*time.Millisecond)); got != FinalAlreadyEnded {
		t.Fatalf("late DESTROY of the old connection: Final = %v, want FinalAlreadyEnded", got)
	}
	x = one(t, c.poll(9*time.Second, again))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 2 || !x.Start.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("got %+v, want the new connection's own first record", x)
	}
}

func TestZoneMoveIsTheSameConnection(t *testing.T) {
	// antrea profile: the connection's key moves from its zone-0 entry to its
	// CNI-zone entry, which has an ID of its own.
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, withID(tcpConn(1000, 10, TCPEstablished), 1))
	moved := withID(tcpConn(1000, 14, TCPEstablished), 2)
	moved.Zone = 65520
	x := one(t, c.poll(5*time.Second, moved))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 14 || x.Conn.Zone != 65520 {
		t.Fatalf("got %+v, want one active record of the one connection", x)
	}
}

func TestDestroyOfTheReplacedConnectionIsAlreadyEnded(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	old := withID(tcpConn(1000, 10, TCPEstablished), 1)
	c.poll(0, old)
	x := one(t, c.poll(1*time.Second, withID(tcpConn(1000, 1, TCPSynSent), 2)))
	if x.Conn.ID != 1 || x.Reason != flowrecord.EndReasonEndOfFlow {
		t.Fatalf("got %+v, want the replaced connection's end", x)
	}
	// Its DESTROY event arrives after the dump that replaced it.
	old.Orig.Packets = 11
	if got := c.s.Final(&old, t0.Add(1500*time.Millisecond)); got != FinalAlreadyEnded {
		t.Fatalf("Final = %v, want FinalAlreadyEnded", got)
	}
	none(t, c.s.Expired(t0.Add(2*time.Second), nil))
	x = one(t, c.poll(6*time.Second, withID(tcpConn(1000, 4, TCPEstablished), 2)))
	if x.Conn.ID != 2 || x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 4 {
		t.Fatalf("got %+v, want the new connection untouched by the late event", x)
	}
}

func TestDestroyOfAnUnseenConnectionBesideTheHeldOne(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	held := withID(tcpConn(1000, 10, TCPEstablished), 2)
	c.poll(0, held)
	// Connection 1 opened and closed on the same tuple before 2 started; its
	// DESTROY event was delivered after the dump that saw 2.
	short := withID(tcpConn(1000, 3, TCPClose), 1)
	if got := c.s.Final(&short, t0.Add(500*time.Millisecond)); got != FinalApplied {
		t.Fatalf("Final = %v, want FinalApplied", got)
	}
	x := one(t, c.poll(time.Second, held))
	if x.Conn.ID != 1 || x.Reason != flowrecord.EndReasonEndOfFlow || x.OrigDelta.Packets != 3 {
		t.Fatalf("got %+v, want the short connection's own end-of-flow", x)
	}
	x = one(t, c.poll(5*time.Second, held))
	if x.Conn.ID != 2 || x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 10 {
		t.Fatalf("got %+v, want the held connection going on", x)
	}
}

func TestDestroyedWhileADumpRanKeepsTheEventsCounters(t *testing.T) {
	for _, idleFirst := range []bool{false, true} {
		c := &clock{t: t, s: newTestStore()}
		conn := tcpConn(1000, 10, TCPEstablished)
		at, wantDelta := time.Duration(0), uint64(14)
		c.poll(at, conn)
		if idleFirst { // exported, then idle: out of the expiry queue
			one(t, c.poll(5*time.Second, conn))
			one(t, c.poll(10*time.Second, conn))
			at, wantDelta = 10*time.Second, 4
		}
		// Destroyed while the next dump ran: the dump misses it, the event
		// is applied at the following poll.
		none(t, c.poll(at+time.Second))
		last := tcpConn(1000, 14, TCPClose)
		if got := c.s.Final(&last, t0.Add(at+1500*time.Millisecond)); got != FinalApplied {
			t.Fatalf("idle %v: Final = %v, want FinalApplied", idleFirst, got)
		}
		x := one(t, c.poll(at+2*time.Second))
		if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.Orig.Packets != 14 || x.OrigDelta.Packets != wantDelta {
			t.Fatalf("idle %v: got %+v, want end-of-flow with the DESTROY event's 14 packets", idleFirst, x)
		}
	}
}

func TestIdleConnectionMissingFromOneDumpGoesOn(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	conn := tcpConn(1000, 10, TCPEstablished)
	c.poll(0, conn)
	one(t, c.poll(5*time.Second, conn))
	if x := one(t, c.poll(10*time.Second, conn)); x.Reason != flowrecord.EndReasonIdleTimeout {
		t.Fatalf("want an idle record first, got %v", x.Reason)
	}
	none(t, c.poll(20*time.Second)) // one dump misses it
	back := tcpConn(1000, 13, TCPEstablished)
	none(t, c.poll(21*time.Second, back))
	x := one(t, c.poll(26*time.Second, back))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 3 {
		t.Fatalf("got %+v, want its later traffic reported as it goes on", x)
	}
	// Gone for real: two dumps in a row lack it, and then it ends.
	none(t, c.poll(27*time.Second))
	x = one(t, c.poll(31*time.Second))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.Orig.Packets != 13 || x.OrigDelta.Packets != 0 {
		t.Fatalf("got %+v, want its end-of-flow once gone", x)
	}
}

func TestRecordDueWhileMissingFromTheLatestDumpWaitsOnePoll(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, tcpConn(1000, 10, TCPEstablished))
	none(t, c.poll(5*time.Second)) // due, but the dump missed it
	x := one(t, c.poll(6*time.Second, tcpConn(1000, 12, TCPEstablished)))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 12 {
		t.Fatalf("got %+v, want its active record once it is back", x)
	}
	none(t, c.poll(11*time.Second))
	x = one(t, c.poll(12*time.Second))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.OrigDelta.Packets != 0 || !x.End.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("got %+v, want one end-of-flow record when found gone, and no active record before it", x)
	}
}
