package store

import (
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestFlushExportsLiveDeltasAndQueuedEnds: at shutdown, a live connection
// that changed since its last export gets its delta, a gone one its queued
// end-of-flow record, and an unchanged one nothing.
func TestFlushExportsLiveDeltasAndQueuedEnds(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	c.poll(0, tcpConn(1000, 10, TCPEstablished), tcpConn(2000, 5, TCPEstablished), tcpConn(3000, 7, TCPEstablished))
	if xs := c.poll(5*time.Second, tcpConn(1000, 10, TCPEstablished), tcpConn(2000, 5, TCPEstablished), tcpConn(3000, 7, TCPEstablished)); len(xs) != 3 {
		t.Fatalf("want the three first records, got %d", len(xs))
	}
	// 1000 moves on, 2000 vanishes (its end-of-flow waits for its expiry), 3000 stays as it is.
	none(t, c.poll(6*time.Second, tcpConn(1000, 14, TCPEstablished), tcpConn(3000, 7, TCPEstablished)))
	got := map[uint16]Export{}
	for _, x := range c.s.Flush(t0.Add(7*time.Second), nil) {
		got[x.Conn.SrcPort] = x
	}
	if len(got) != 2 {
		t.Fatalf("flushed %+v, want 2 records", got)
	}
	if x := got[1000]; x.Reason != flowrecord.EndReasonActiveTimeout || x.OrigDelta.Packets != 4 {
		t.Fatalf("live connection: %+v, want its 4-packet delta", x)
	}
	if x := got[2000]; x.Reason != flowrecord.EndReasonEndOfFlow || x.OrigDelta.Packets != 0 || x.Conn.Orig.Packets != 5 {
		t.Fatalf("gone connection: %+v, want its end-of-flow record", x)
	}
}

// TestResumeGoesOnFromTheLastExport: a store resumed from a previous run's
// last exports takes the next delta of the same connection (same ID and
// tuple) from those totals; another ID on the tuple is a new connection; what
// was not seen again is reported as ended.
func TestResumeGoesOnFromTheLastExport(t *testing.T) {
	prev := &clock{t: t, s: newTestStore()}
	prev.poll(0, tcpConn(1000, 10, TCPEstablished), tcpConn(2000, 3, TCPEstablished), tcpConn(3000, 1, TCPEstablished))
	var saved []Exported
	for _, x := range prev.poll(5*time.Second, tcpConn(1000, 10, TCPEstablished), tcpConn(2000, 3, TCPEstablished), tcpConn(3000, 1, TCPEstablished)) {
		saved = append(saved, ExportedOf(&x, t0.Add(5*time.Second).UnixNano()))
	}

	c := &clock{t: t, s: newTestStore()}
	c.s.Resume(saved)
	reused := tcpConn(2000, 2, TCPEstablished)
	reused.ID = 99 // the tuple of 2000, another connection
	none(t, c.poll(10*time.Second, tcpConn(1000, 25, TCPEstablished), reused))
	res := c.s.EndResume()
	if res.Resumed != 1 || len(res.Ended) != 2 || len(res.Forget) != 2 || res.Closed != 0 {
		t.Fatalf("resume %+v: want 1 resumed, 2000 and 3000 ended and forgotten", res)
	}
	got := map[uint16]Export{}
	for _, x := range c.poll(15*time.Second, tcpConn(1000, 25, TCPEstablished), reused) {
		got[x.Conn.SrcPort] = x
	}
	if x := got[1000]; x.OrigDelta.Packets != 15 || x.Reason != flowrecord.EndReasonActiveTimeout {
		t.Fatalf("resumed connection: %+v, want the 15 packets since the last export", x)
	}
	if x := got[2000]; x.OrigDelta.Packets != 2 || x.Conn.ID != 99 {
		t.Fatalf("new connection on a saved tuple: %+v, want its own 2 packets", x)
	}
}

// TestResumeKeepsClosedConnectionsEnded: a connection whose end-of-flow
// record went out while conntrack still held it (TIME_WAIT) is saved as
// closed; a restarted store that finds it still closing holds it as ended
// and never reports it again, forgets it once conntrack drops it, and a new
// connection on its tuple is reported as new. A connection a DESTROY event
// ended is not saved at all (conntrack cannot show it again).
func TestResumeKeepsClosedConnectionsEnded(t *testing.T) {
	prev := &clock{t: t, s: newTestStore()}
	prev.poll(0, tcpConn(1000, 10, TCPEstablished), tcpConn(2000, 3, TCPEstablished), tcpConn(3000, 4, TCPEstablished))
	var saved []Exported
	keep := func(xs []Export) {
		for _, x := range xs {
			saved = append(saved, ExportedOf(&x, prev.now.UnixNano()))
		}
	}
	keep(prev.poll(5*time.Second, tcpConn(1000, 10, TCPEstablished), tcpConn(2000, 3, TCPEstablished), tcpConn(3000, 4, TCPEstablished)))
	ended := tcpConn(3000, 6, TCPClose)
	if prev.s.Final(&ended, prev.now.Add(time.Second)) != FinalApplied {
		t.Fatal("the DESTROY event was not applied")
	}
	xs := prev.poll(10*time.Second, tcpConn(1000, 12, TCPTimeWait), tcpConn(2000, 5, TCPEstablished))
	byPort := map[uint16]Export{}
	for _, x := range xs {
		byPort[x.Conn.SrcPort] = x
	}
	if x := byPort[1000]; x.Reason != flowrecord.EndReasonEndOfFlow || !x.Lingers {
		t.Fatalf("TIME_WAIT connection: %+v, want its end of flow, still held by conntrack", x)
	}
	if x := byPort[3000]; x.Reason != flowrecord.EndReasonEndOfFlow || x.Lingers {
		t.Fatalf("destroyed connection: %+v, want its end of flow, gone", x)
	}
	keep(xs)
	last := map[uint16]Exported{}
	for _, x := range saved {
		last[x.SrcPort] = x
	}
	if !last[1000].Closed || last[2000].Closed {
		t.Fatalf("saved %+v: want 1000 closed, 2000 live", last)
	}

	c := &clock{t: t, s: newTestStore()}
	c.s.Resume([]Exported{last[1000], last[2000]})
	none(t, c.poll(12*time.Second, tcpConn(1000, 12, TCPTimeWait), tcpConn(2000, 7, TCPEstablished)))
	res := c.s.EndResume()
	if res.Resumed != 1 || res.Closed != 1 || len(res.Ended) != 0 || len(res.Forget) != 0 {
		t.Fatalf("resume %+v: want 2000 resumed and 1000 found closed", res)
	}
	var liveDelta uint64
	for _, at := range []time.Duration{15, 20, 25, 30} {
		for _, x := range c.poll(at*time.Second, tcpConn(1000, 12, TCPTimeWait), tcpConn(2000, 7, TCPEstablished)) {
			if x.Conn.SrcPort == 1000 {
				t.Fatalf("at %ds: the closed connection was reported again: %+v", at, x)
			}
			liveDelta += x.OrigDelta.Packets
		}
	}
	if liveDelta != 2 {
		t.Fatalf("live connection: deltas of %d packets, want the 2 since the previous run's export", liveDelta)
	}
	if got := c.s.TakeForgotten(nil); len(got) != 0 {
		t.Fatalf("forgotten %+v while conntrack still holds it", got)
	}
	// It leaves the table (two dumps without it): its saved state goes.
	none(t, c.poll(31*time.Second, tcpConn(2000, 7, TCPEstablished)))
	none(t, c.poll(32*time.Second, tcpConn(2000, 7, TCPEstablished)))
	if got := c.s.TakeForgotten(nil); len(got) != 1 || got[0].SrcPort != 1000 || got[0].ID != 1000 {
		t.Fatalf("forgotten %+v, want the closed connection once", got)
	}
	// A new connection on its tuple is reported.
	reused := tcpConn(1000, 2, TCPEstablished)
	reused.ID = 77
	c.poll(33*time.Second, reused, tcpConn(2000, 7, TCPEstablished))
	if x := one(t, c.poll(38*time.Second, reused, tcpConn(2000, 7, TCPEstablished))); x.Conn.ID != 77 || x.OrigDelta.Packets != 2 {
		t.Fatalf("new connection on the tuple: %+v", x)
	}
}

// TestResumeForgetsClosedConnectionsGoneWhileStopped: a closed connection
// that left conntrack while no receiver ran is forgotten, and not counted
// as ended (nothing of it was lost).
func TestResumeForgetsClosedConnectionsGoneWhileStopped(t *testing.T) {
	c := &clock{t: t, s: newTestStore()}
	x := tcpConn(1000, 12, TCPTimeWait)
	c.s.Resume([]Exported{{Key: x.Key, ID: x.ID, Orig: x.Orig, Reply: x.Reply, TCPState: x.TCPState, Closed: true}})
	none(t, c.poll(0))
	res := c.s.EndResume()
	if res.Closed != 1 || len(res.Ended) != 0 || len(res.Forget) != 1 {
		t.Fatalf("resume %+v: want the closed connection forgotten, not ended", res)
	}
}
