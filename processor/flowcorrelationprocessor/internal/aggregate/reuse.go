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

// starts are a connection's start as each side reported it.
type starts struct{ source, destination time.Time }

// lineage is how a record relates to the held entry of its key.
type lineage uint8

const (
	sameConnection lineage = iota
	newConnection          // started after the held connection on its side: the tuple was reused
	oldConnection          // of a connection the held one replaced
)

// lineageOf says whether r, a half h record, is of e's connection, of a new
// connection on e's tuple, or of one e replaced.
func (e *entry) lineageOf(r *flowrecord.Record, h half) lineage {
	if r.Start.IsZero() {
		return sameConnection
	}
	src, dst := sidesOf(e.required, h)
	l := sameConnection
	if src {
		l = max(l, sideLineage(e.sourceStart, e.replaced.source, r.Start))
	}
	if dst {
		l = max(l, sideLineage(e.destinationStart, e.replaced.destination, r.Start))
	}
	return l
}

// sideLineage compares start, the record's, with held (the start its side
// reported for the entry, zero when it did not yet) and replaced (the start
// its side reported for the connection the entry replaced).
func sideLineage(held, replaced, start time.Time) lineage {
	switch {
	case held.IsZero():
		if !replaced.IsZero() && !start.After(replaced) {
			return oldConnection
		}
	case start.After(held):
		return newConnection
	case start.Before(held):
		return oldConnection
	}
	return sameConnection
}

// startsOf is what a record of an older connection than e's successor
// started no later than, per side.
func (e *entry) startsOf() starts {
	s := e.replaced
	if !e.sourceStart.IsZero() {
		s.source = e.sourceStart
	}
	if !e.destinationStart.IsZero() {
		s.destination = e.destinationStart
	}
	return s
}
