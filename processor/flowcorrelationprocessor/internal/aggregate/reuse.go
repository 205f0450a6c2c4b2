package aggregate

import (
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Tuple reuse. Both connections on a reused 5-tuple share one correlation
// key, but not one record chain: the kernel's new conntrack entry starts
// with its own start time and counters from 0, so folded into the held
// entry its counters would look like they went backwards, its deltas stay 0
// until they pass the old totals, and two connections would be reported as
// one.
//
// A connection's start is constant in every record one Node sends about it,
// so a side tells its connections apart by start time. Starts are only
// compared within a side: each comes from that side's Node's clock. A record
// whose side reported an earlier start for the held entry is a new
// connection: the held entry is finished (exported as it is, if anything of
// it is unreported, with ReasonReplaced) and the record starts a new entry,
// which pairs with its own peer. A record whose side reported a later start
// is of an older connection already replaced; so is a record, for a side the
// new entry has not heard from yet, that started no later than that side's
// start in the replaced entry (without this, the old connection's late
// half would pair with the new one's). Such records are dropped and counted
// (OnStale): the replaced entry is gone, and its exports already carried
// everything its held records had; counts that only such a late record
// carries are not reported. Records without a start time are never told
// apart.

// starts are a connection's start as each side reported it, in Unix ns
// (0: that side did not report, or without a start).
type starts struct{ source, destination int64 }

// lineage is how a record relates to the held entry of its key.
type lineage uint8

const (
	sameConnection lineage = iota
	newConnection          // started after the held connection on its side: the tuple was reused
	oldConnection          // of a connection the held one replaced
)

// lineageOf says whether r, a half h record, is of e's connection, of a new
// connection on e's tuple, or of one e replaced (whose starts were replaced).
func (e *entry) lineageOf(r *flowrecord.Record, h half, replaced starts) lineage {
	if r.Start.IsZero() {
		return sameConnection
	}
	start := r.Start.UnixNano()
	held := e.starts()
	src, dst := sidesOf(e.required, h)
	l := sameConnection
	if src {
		l = max(l, sideLineage(held.source, replaced.source, start))
	}
	if dst {
		l = max(l, sideLineage(held.destination, replaced.destination, start))
	}
	return l
}

// sideLineage compares start, the record's, with held (the start its side
// reported for the entry, 0 when it did not yet) and replaced (the start its
// side reported for the connection the entry replaced).
func sideLineage(held, replaced, start int64) lineage {
	switch {
	case held == 0:
		if replaced != 0 && start <= replaced {
			return oldConnection
		}
	case start > held:
		return newConnection
	case start < held:
		return oldConnection
	}
	return sameConnection
}

// starts are the starts e's sides reported: the first record's for its
// side(s), peerStart for the other once it reported.
func (e *entry) starts() starts {
	var s starts
	first := unixNano(e.rec.Start)
	src, dst := sidesOf(e.required, e.first)
	switch {
	case src:
		s.source = first
	case !e.agg.EndFromSource.IsZero():
		s.source = e.peerStart
	}
	switch {
	case dst:
		s.destination = first
	case !e.agg.EndFromDestination.IsZero():
		s.destination = e.peerStart
	}
	return s
}

// startsBefore is what a record of a connection older than e's successor
// started no later than, per side: e's starts, else those e replaced.
func (e *entry) startsBefore(replaced starts) starts {
	s := e.starts()
	if s.source == 0 {
		s.source = replaced.source
	}
	if s.destination == 0 {
		s.destination = replaced.destination
	}
	return s
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
