package store

import (
	"net/netip"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	active = 5 * time.Second
	idle   = 15 * time.Second
	stale  = 5 * time.Minute
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func newTestStore() *Store {
	return New(Config{ActiveTimeout: active, IdleTimeout: idle, StaleTimeout: stale})
}

func tcpConn(sport uint16, pkts uint64, state uint8) Conn {
	return Conn{
		Key: Key{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
			SrcPort: sport, DstPort: 80, Proto: 6},
		ID: uint32(sport), TCPState: state,
		Orig:  Counters{Packets: pkts, Bytes: pkts * 100},
		Reply: Counters{Packets: pkts, Bytes: pkts * 200},
	}
}

// clock drives a store through polls and exports at chosen instants.
type clock struct {
	t   *testing.T
	s   *Store
	now time.Time
}

// poll applies a dump holding conns at t0+at and exports what is due.
func (c *clock) poll(at time.Duration, conns ...Conn) []Export {
	c.t.Helper()
	c.now = t0.Add(at)
	c.s.BeginPoll(c.now)
	for i := range conns {
		c.s.Observe(&conns[i])
	}
	c.s.EndPoll()
	return c.s.Expired(c.now, nil)
}

func one(t *testing.T, xs []Export) Export {
	t.Helper()
	if len(xs) != 1 {
		t.Fatalf("got %d exports, want 1: %+v", len(xs), xs)
	}
	return xs[0]
}

func none(t *testing.T, xs []Export) {
	t.Helper()
	if len(xs) != 0 {
		t.Fatalf("got %d exports, want none: %+v", len(xs), xs)
	}
}

func TestActiveTimeoutExportKeepsConnectionAndSnapshotsCounters(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	none(t, c.poll(0, tcpConn(1000, 10, TCPEstablished)))
	none(t, c.poll(4*time.Second, tcpConn(1000, 20, TCPEstablished)))
	x := one(t, c.poll(5*time.Second, tcpConn(1000, 30, TCPEstablished)))
	if x.Reason != flowrecord.EndReasonActiveTimeout {
		t.Fatalf("reason %v, want active_timeout", x.Reason)
	}
	if x.OrigDelta != (Counters{30, 3000}) || x.ReplyDelta != (Counters{30, 6000}) {
		t.Fatalf("first deltas %+v %+v, want the totals", x.OrigDelta, x.ReplyDelta)
	}
	if c.s.Queued() != 1 {
		t.Fatalf("connection left the queue after an active export")
	}
	x = one(t, c.poll(10*time.Second, tcpConn(1000, 45, TCPEstablished)))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta != (Counters{15, 1500}) || x.Conn.Orig.Packets != 45 {
		t.Fatalf("second export %+v: want reason 2, delta 15 packets since the previous export, total 45", x)
	}
}

func TestIdleExportWithoutChangeLeavesQueueAndComesBackWhenActive(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	conn := tcpConn(1000, 10, TCPEstablished)
	c.poll(0, conn)
	one(t, c.poll(5*time.Second, conn)) // active export, prev := 10
	for at := 6 * time.Second; at < 10*time.Second; at += time.Second {
		none(t, c.poll(at, conn))
	}
	// Nothing new during the active period: Antrea's IsActive is false, so the
	// next expiry produces an idle record.
	x := one(t, c.poll(10*time.Second, conn))
	if x.Reason != flowrecord.EndReasonIdleTimeout || x.OrigDelta != (Counters{}) {
		t.Fatalf("got %+v, want an idle record with zero deltas", x)
	}
	if c.s.Queued() != 0 || c.s.Len() != 1 {
		t.Fatalf("idle connection: queued %d held %d, want 0 and 1", c.s.Queued(), c.s.Len())
	}
	none(t, c.poll(60*time.Second, conn))
	more := tcpConn(1000, 12, TCPEstablished)
	none(t, c.poll(61*time.Second, more))
	if c.s.Queued() != 1 {
		t.Fatalf("changed idle connection was not re-queued")
	}
	x = one(t, c.poll(66*time.Second, more))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 2 {
		t.Fatalf("got %+v, want active record with delta 2", x)
	}
}

func TestIdleExpiryIsPushedWhileConnectionChanges(t *testing.T) {
	// idle < active: only a connection that stops changing goes idle.
	c := &clock{t: t, s: New(Config{ActiveTimeout: 30 * time.Second, IdleTimeout: 5 * time.Second, StaleTimeout: stale})}
	for i := range 10 {
		none(t, c.poll(time.Duration(i)*time.Second, tcpConn(1000, uint64(i+1), TCPEstablished)))
	}
	// Unchanged from 9 s on: the idle expiry fires at 9 s + 5 s. The
	// connection changed since its last export (there was none), so the record
	// says active timeout; 5 s later, still unchanged, it goes idle.
	x := one(t, c.poll(14*time.Second, tcpConn(1000, 10, TCPEstablished)))
	if x.Reason != flowrecord.EndReasonActiveTimeout {
		t.Fatalf("reason %v, want active_timeout (changed since last export)", x.Reason)
	}
	x = one(t, c.poll(19*time.Second, tcpConn(1000, 10, TCPEstablished)))
	if x.Reason != flowrecord.EndReasonIdleTimeout {
		t.Fatalf("reason %v, want idle_timeout", x.Reason)
	}
}

func TestTimeWaitIsEndOfFlowFrozenAndDeletedWhenGone(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, tcpConn(1000, 10, TCPEstablished))
	none(t, c.poll(2*time.Second, tcpConn(1000, 12, TCPTimeWait)))
	x := one(t, c.poll(5*time.Second, tcpConn(1000, 99, TCPEstablished)))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.TCPState != TCPTimeWait || x.Conn.Orig.Packets != 12 {
		t.Fatalf("got %+v, want end-of-flow in TIME_WAIT with the frozen 12 packets", x)
	}
	none(t, c.poll(10*time.Second, tcpConn(1000, 12, TCPTimeWait)))
	if c.s.Len() != 1 {
		t.Fatalf("connection still in conntrack was deleted")
	}
	none(t, c.poll(15*time.Second))
	if c.s.Len() != 1 {
		t.Fatalf("exported dying connection was deleted when a single dump missed it")
	}
	none(t, c.poll(16*time.Second))
	if c.s.Len() != 0 {
		t.Fatalf("exported dying connection was not deleted once gone")
	}
}

func TestDyingStatusBitEndsNonTCP(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	u := tcpConn(53, 1, 0)
	u.Proto = 17
	c.poll(0, u)
	u.Status |= StatusDying
	u.Stop = t0.Add(3 * time.Second).UnixNano()
	x := one(t, c.poll(5*time.Second, u))
	if x.Reason != flowrecord.EndReasonEndOfFlow || !x.End.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("got reason %v end %v, want end-of-flow ending at the conntrack stop time", x.Reason, x.End)
	}
}

func TestVanishedWhileQueuedGetsEndOfFlowAtItsExpiry(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, tcpConn(1000, 10, TCPEstablished))
	none(t, c.poll(2*time.Second)) // gone; queued until its active expiry
	x := one(t, c.poll(5*time.Second))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.Orig.Packets != 10 || !x.End.Equal(t0) {
		t.Fatalf("got %+v, want end-of-flow with the last counters, ending when last seen", x)
	}
	c.poll(6 * time.Second)
	if c.s.Len() != 0 {
		t.Fatalf("gone connection not deleted after its final record")
	}
}

func TestIdleThenVanishedStillGetsFinalRecord(t *testing.T) {
	// Antrea sends nothing here and deletes the connection when stale.
	c := &clock{t: t, s: newTestStore()}
	conn := tcpConn(1000, 10, TCPEstablished)
	c.poll(0, conn)
	one(t, c.poll(5*time.Second, conn))
	if x := one(t, c.poll(10*time.Second, conn)); x.Reason != flowrecord.EndReasonIdleTimeout {
		t.Fatalf("want an idle record first, got %v", x.Reason)
	}
	none(t, c.poll(40*time.Second, conn))
	none(t, c.poll(41*time.Second)) // one dump missing it is not the end
	x := one(t, c.poll(45*time.Second))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.Orig.Packets != 10 || x.OrigDelta != (Counters{}) {
		t.Fatalf("got %+v, want a final end-of-flow record with zero deltas", x)
	}
	if !x.End.Equal(t0.Add(40 * time.Second)) {
		t.Fatalf("end %v, want the last poll that saw it", x.End)
	}
	c.poll(50 * time.Second)
	if c.s.Len() != 0 {
		t.Fatalf("not deleted after the final record")
	}
}

func TestDeltasClampAtZero(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, tcpConn(1000, 10, TCPEstablished))
	one(t, c.poll(5*time.Second, tcpConn(1000, 10, TCPEstablished)))
	// Counters went backwards (e.g. the view switched between conntrack zones).
	x := one(t, c.poll(10*time.Second, tcpConn(1000, 7, TCPEstablished)))
	if x.OrigDelta != (Counters{}) || x.ReplyDelta != (Counters{}) {
		t.Fatalf("deltas %+v %+v, want 0", x.OrigDelta, x.ReplyDelta)
	}
}

func TestStaleGoneConnectionIsRemovedAndCounted(t *testing.T) {
	s := newTestStore()
	s.BeginPoll(t0)
	conn := tcpConn(1000, 1, TCPEstablished)
	s.Observe(&conn)
	s.EndPoll()
	s.BeginPoll(t0.Add(time.Second))
	if st := s.EndPoll(); st.Gone != 0 {
		t.Fatalf("stats %+v, want none gone after one dump missed it", st)
	}
	s.BeginPoll(t0.Add(time.Second))
	if st := s.EndPoll(); st.Gone != 1 {
		t.Fatalf("stats %+v, want 1 gone", st)
	}
	// No export ran (a stalled pipeline); past the stale timeout it is removed.
	s.BeginPoll(t0.Add(time.Second + stale))
	st := s.EndPoll()
	if st.Stale != 1 || s.Len() != 0 || s.Queued() != 0 {
		t.Fatalf("stats %+v len %d queued %d, want one stale removal", st, s.Len(), s.Queued())
	}
}

func TestMaxConnectionsShedsNewConnections(t *testing.T) {
	s := New(Config{ActiveTimeout: active, IdleTimeout: idle, MaxConnections: 2})
	s.BeginPoll(t0)
	var accepted int
	for i := range 5 {
		c := tcpConn(uint16(1000+i), 1, TCPEstablished)
		if s.Observe(&c) {
			accepted++
		}
	}
	st := s.EndPoll()
	if accepted != 2 || st.Shed != 3 || st.New != 2 || s.Len() != 2 {
		t.Fatalf("accepted %d stats %+v len %d, want 2 kept and 3 shed", accepted, st, s.Len())
	}
	// Known connections still update at the bound.
	c := tcpConn(1000, 5, TCPEstablished)
	s.BeginPoll(t0.Add(time.Second))
	if !s.Observe(&c) {
		t.Fatalf("a known connection was shed")
	}
}

func TestFinalEventForUnseenConnection(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0)
	short := tcpConn(2000, 6, TCPTimeWait)
	short.Start = t0.Add(1 * time.Second).UnixNano()
	if c.s.Final(&short, t0.Add(2*time.Second)) != FinalApplied {
		t.Fatal("shed")
	}
	x := one(t, c.poll(3*time.Second))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.OrigDelta.Packets != 6 || !x.Start.Equal(t0.Add(time.Second)) || !x.End.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("got %+v, want one end-of-flow record with the event's counters and times", x)
	}
	c.poll(4 * time.Second)
	if c.s.Len() != 0 {
		t.Fatalf("short connection not deleted")
	}
}

func TestFinalEventUpdatesKnownConnection(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, tcpConn(1000, 10, TCPEstablished))
	last := tcpConn(1000, 14, TCPClose)
	c.s.Final(&last, t0.Add(time.Second))
	x := one(t, c.poll(2*time.Second))
	if x.Reason != flowrecord.EndReasonEndOfFlow || x.Conn.Orig.Packets != 14 {
		t.Fatalf("got %+v, want end-of-flow with the DESTROY counters", x)
	}
	// A late duplicate event changes nothing.
	c.s.Final(&last, t0.Add(3*time.Second))
	none(t, c.s.Expired(t0.Add(3*time.Second), nil))
}

func TestTupleReuseAfterFinalRecordIsANewConnection(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, tcpConn(1000, 10, TCPTimeWait))
	one(t, c.poll(5*time.Second, tcpConn(1000, 10, TCPTimeWait)))
	again := tcpConn(1000, 3, TCPEstablished)
	again.ID = 4242
	none(t, c.poll(6*time.Second, again))
	x := one(t, c.poll(11*time.Second, again))
	if x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 3 || x.Conn.ID != 4242 {
		t.Fatalf("got %+v, want the new connection's own first record", x)
	}
}

func TestExportsInExpiryOrderAndRequeue(t *testing.T) {
	s := New(Config{ActiveTimeout: active, IdleTimeout: time.Hour})
	for i := range 50 {
		s.BeginPoll(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		for j := 0; j <= i; j++ {
			c := tcpConn(uint16(1000+j), uint64(i+1), TCPEstablished)
			s.Observe(&c)
		}
		s.EndPoll()
	}
	xs := s.Expired(t0.Add(active+5*time.Second), nil)
	if len(xs) != 50 {
		t.Fatalf("got %d exports, want 50", len(xs))
	}
	if next, ok := s.NextExpiry(); !ok || !next.Equal(t0.Add(2*active+5*time.Second)) {
		t.Fatalf("next expiry %v, want %v", next, t0.Add(2*active+5*time.Second))
	}
	// Exported in expiry order: connection j was first seen at j*100ms.
	for j, x := range xs {
		if x.Conn.SrcPort != uint16(1000+j) {
			t.Fatalf("export %d is port %d, want %d", j, x.Conn.SrcPort, 1000+j)
		}
	}
}

func TestHeapRemoveKeepsOrder(t *testing.T) {
	var h expiryHeap
	es := make([]*entry, 100)
	for i := range es {
		es[i] = &entry{activeExpire: int64((i * 37) % 100), idleExpire: 1 << 62}
		h.push(es[i])
	}
	for i := 0; i < 100; i += 3 {
		h.remove(es[i])
		if es[i].index != -1 {
			t.Fatal("removed entry keeps an index")
		}
	}
	last := int64(-1)
	for len(h) > 0 {
		e := h[0]
		h.remove(e)
		if e.activeExpire < last {
			t.Fatalf("heap out of order: %d after %d", e.activeExpire, last)
		}
		last = e.activeExpire
	}
}

func TestDyingAndTCPStateNames(t *testing.T) {
	for _, tc := range []struct {
		c    Conn
		want bool
	}{
		{tcpConn(1, 1, TCPTimeWait), true},
		{tcpConn(1, 1, TCPClose), true},
		{tcpConn(1, 1, TCPEstablished), false},
		{Conn{Key: Key{Proto: 6}, Status: StatusDying, TCPState: TCPEstablished}, false},
		{Conn{Key: Key{Proto: 17}, Status: StatusDying}, true},
		{Conn{Key: Key{Proto: 132}}, false},
	} {
		if got := tc.c.Dying(); got != tc.want {
			t.Errorf("Dying(proto %d state %d status %#x) = %v", tc.c.Proto, tc.c.TCPState, tc.c.Status, got)
		}
	}
	for s, want := range map[uint8]string{0: "NONE", 3: "ESTABLISHED", 7: "TIME_WAIT", 9: "SYN_SENT2", 10: ""} {
		if got := TCPStateName(s); got != want {
			t.Errorf("TCPStateName(%d) = %q, want %q", s, got, want)
		}
	}
}

func TestNewConnectionStartsActiveEvenWithoutCounters(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	zero := tcpConn(1000, 0, TCPSynSent)
	c.poll(0, zero)
	if x := one(t, c.poll(5*time.Second, zero)); x.Reason != flowrecord.EndReasonActiveTimeout {
		t.Fatalf("first record of a connection without counters: reason %v, want active_timeout", x.Reason)
	}
	if x := one(t, c.poll(10*time.Second, zero)); x.Reason != flowrecord.EndReasonIdleTimeout {
		t.Fatalf("second record: reason %v, want idle_timeout", x.Reason)
	}
}
