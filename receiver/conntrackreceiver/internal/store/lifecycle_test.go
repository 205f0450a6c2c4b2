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
	resumed, ended := c.s.EndResume()
	if resumed != 1 || len(ended) != 2 {
		t.Fatalf("resumed %d, ended %+v: want 1 resumed, 2000 and 3000 ended", resumed, ended)
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
