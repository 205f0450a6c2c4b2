// Package aggregate is the state of the flow_correlation processor's
// aggregate mode: connections by correlation key, the pairing of their two
// halves, Antrea's per-Node statistics, and the deadlines that decide when a
// connection is exported and forgotten. It has no clock and no goroutine:
// the caller passes the time, so every timer rule is tested deterministically.
// A Table is not safe for concurrent use.
package aggregate

import (
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Settings are the table's timeouts and bound.
type Settings struct {
	// ActiveTimeout: a ready connection is re-exported this long after its
	// previous export, if new data arrived.
	ActiveTimeout time.Duration
	// InactiveTimeout: a connection is forgotten this long after its last record.
	InactiveTimeout time.Duration
	// PairingTimeout: a half without a peer is exported unpaired this long
	// after it arrived.
	PairingTimeout time.Duration
	// MaxRecords bounds the connections held; 0 means unbounded.
	MaxRecords int
	// RecycleLabels: the label maps of the records added are the table's
	// (the caller neither reads nor changes them after Add, and no two
	// records share one); those of forgotten connections are cleared and
	// kept for TakeLabels.
	RecycleLabels bool
}

// Reason says why a record is exported.
type Reason uint8

const (
	ReasonReady          Reason = iota // first export: paired, or needs no pairing
	ReasonActiveTimeout                // periodic re-export with new data
	ReasonInactive                     // last export before the connection is forgotten
	ReasonPairingTimeout               // no peer within the pairing timeout: exported unpaired
	ReasonEvicted                      // exported early under the memory bound
	ReasonFlush                        // exported at shutdown
	ReasonReplaced                     // last export: a new connection on the same tuple replaced it (reuse.go)
)

var reasonNames = [...]string{"ready", "active_timeout", "inactive_timeout", "pairing_timeout", "evicted", "flush", "replaced"}

func (r Reason) String() string { return reasonNames[r] }

// Emit receives each exported record. The record is the table's own and
// only valid during the call: encode or copy it there, and do not modify it
// (copy it first).
type Emit func(r *flowrecord.Record, why Reason)

// Table holds the connections being correlated.
type Table struct {
	s       Settings
	entries map[string]*entry
	queue   deadlineQueue
	pending int // entries not ready: halves waiting for their peer

	// OnRelayFolded, when set, is told of each export a relay leg's entry
	// did not make (see flowrecord.SideRelay).
	OnRelayFolded func(why Reason)

	// OnPaired, when set, is told how long each pair waited for its second half.
	OnPaired func(wait time.Duration)
	// OnLate, when set, is told of each record that is not newer than the
	// last one of its side: an exact duplicate (the same end timestamp and
	// totals), ignored; or a reordered distinct export, whose counts are
	// exported once either way (see ledger.go).
	OnLate func(duplicate bool)
	// OnReplaced, when set, is told of each held connection finished because
	// a record of a new connection on its tuple arrived (see reuse.go).
	OnReplaced func()
	// OnStale, when set, is told of each record of a connection already
	// replaced on its tuple: it is dropped (see reuse.go).
	OnStale func()
	// OnAlreadyReported, when set, is told of each lone half whose pairing
	// timeout passed with nothing its Node had not reported before: it is
	// not exported (see exportUnpaired).
	OnAlreadyReported func()

	// replaced holds, by key, the starts of the connection the held one
	// replaced on its tuple (see reuse.go); rare, so kept out of the entries.
	replaced map[string]starts

	// free are forgotten entries, zeroed, for the next inserts; labels
	// their label maps, cleared, for the caller (see free.go).
	free   freeList[*entry]
	labels freeList[map[string]string]
}

// New returns an empty table.
func New(s Settings) *Table {
	return &Table{s: s, entries: make(map[string]*entry), replaced: make(map[string]starts)}
}

// Len is the number of connections held.
func (t *Table) Len() int { return len(t.entries) }

// Pending is the number of held halves still waiting for their peer.
func (t *Table) Pending() int { return t.pending }

// Add folds r, received at now, into its connection, and emits what became
// ready: a connection that needs no pairing on its first record, a pair when
// its second half arrives. A record of a new connection on a held
// connection's tuple finishes the held one first; one of a connection
// already replaced is dropped (see reuse.go). r is not retained (its maps
// may be). Records without an end timestamp must be rejected by the caller.
func (t *Table) Add(r *flowrecord.Record, now time.Time, emit Emit) {
	key := r.Key
	if key == "" {
		key = r.CorrelationKey()
	}
	h := halfOf(r)
	e, ok := t.entries[key]
	if ok {
		var replaced starts
		if len(t.replaced) > 0 { // no hashing the key again unless a tuple was reused
			replaced = t.replaced[key]
		}
		switch e.lineageOf(r, h, replaced) {
		case oldConnection:
			if t.OnStale != nil {
				t.OnStale()
			}
			return
		case newConnection:
			replaced = e.startsBefore(replaced)
			t.finish(e, now, emit)
			t.replaced[key] = replaced
			ok = false
		}
	}
	if !ok {
		e = t.insert(key, r, h, now)
		if e.ready {
			t.export(e, now, ReasonReady, emit)
		}
		e.due = e.nextDeadline()
		t.queue.push(e)
		t.enforceBound(now, emit)
		return
	}
	pairedNow := false
	e.relay = e.relay || h == halfRelay
	if e.required && !e.paired && !sameHalf(e.first, h) {
		merge(&e.rec, r, h)
		if !e.ready {
			t.pending--
		}
		e.paired, e.ready, pairedNow = true, true, true
		if t.OnPaired != nil {
			t.OnPaired(now.Sub(time.Unix(0, e.pairingDeadline-int64(t.s.PairingTimeout))))
		}
	}
	fresh, what := addStats(e, r, h)
	if fresh {
		e.updated = true
		e.inactiveDeadline = now.Add(t.s.InactiveTimeout).UnixNano()
	}
	if what != arrivalNewer && t.OnLate != nil {
		t.OnLate(what == arrivalDuplicate)
	}
	if pairedNow {
		t.export(e, now, ReasonReady, emit)
	}
	t.queue.reschedule(e)
}

func (t *Table) insert(key string, r *flowrecord.Record, h half, now time.Time) *entry {
	e := t.newEntry()
	e.rec, e.first, e.updated = *r, h, true
	e.rec.Aggregation = &e.agg
	e.rec.Key = key
	e.required = correlationRequired(r, h)
	e.relay = h == halfRelay
	e.ready = !e.required
	if !e.ready {
		t.pending++
	}
	initStats(e, r, h)
	e.pairingDeadline = now.Add(t.s.PairingTimeout).UnixNano()
	e.activeDeadline = now.Add(t.s.ActiveTimeout).UnixNano()
	e.inactiveDeadline = now.Add(t.s.InactiveTimeout).UnixNano()
	t.entries[key] = e
	return e
}

// finish exports what is unreported of e, a connection a new one on its
// tuple replaced, and forgets it.
func (t *Table) finish(e *entry, now time.Time, emit Emit) {
	t.queue.remove(e.index)
	t.forget(e)
	t.exportRemoved(e, now, ReasonReplaced, emit)
	if t.OnReplaced != nil {
		t.OnReplaced()
	}
}

// forget drops e, out of the queue already, from the table.
func (t *Table) forget(e *entry) {
	delete(t.entries, e.rec.Key)
	if len(t.replaced) > 0 {
		delete(t.replaced, e.rec.Key)
	}
}

// Expire does what is due at now: exports pending halves whose pairing
// timeout passed (unpaired), re-exports ready connections whose active
// timeout passed if they have new data, and forgets connections whose
// inactive timeout passed, after a last export if they have new data.
func (t *Table) Expire(now time.Time, emit Emit) {
	t.trimFree()
	due := now.UnixNano()
	for len(t.queue) > 0 && t.queue[0].due <= due {
		e := t.queue[0]
		if t.expire(e, now, emit) {
			t.queue.pop()
			t.forget(e)
			t.release(e)
			continue
		}
		e.due = e.nextDeadline()
		t.queue.fix(0)
	}
	t.markFree()
}

// expire handles e at now and reports whether it is to be forgotten.
func (t *Table) expire(e *entry, now time.Time, emit Emit) bool {
	if !e.ready {
		if now.UnixNano() < e.pairingDeadline {
			return false
		}
		t.pending--
		e.ready = true // from now on an unpaired connection, exported like any other
		t.exportUnpaired(e, now, ReasonPairingTimeout, emit)
		return now.UnixNano() >= e.inactiveDeadline
	}
	if now.UnixNano() >= e.inactiveDeadline {
		// The last export; it carries the end of the flow if a side
		// reported it and no export did yet (the other side's never came).
		if e.updated || (e.rec.EndReason == flowrecord.EndReasonEndOfFlow && !e.endSent) {
			t.export(e, now, ReasonInactive, emit)
		}
		return true
	}
	if now.UnixNano() >= e.activeDeadline {
		if e.updated {
			t.export(e, now, ReasonActiveTimeout, emit)
		} else {
			e.activeDeadline = now.Add(t.s.ActiveTimeout).UnixNano()
		}
	}
	return false
}

// exportUnpaired exports e, a half that never paired, unless its Node
// reported all it carries before (entry.alreadyReported): a lone half of a
// connection this table exported and forgot (the end-of-flow record of a
// connection idle past the inactive timeout; a denied connection's SYN_SENT
// half that conntrack destroys minutes after the denial was paired). Its
// counts went out already; exported alone it would start a second,
// unpaired record chain of a connection reported whole. It is counted
// (OnAlreadyReported) and treated as exported.
func (t *Table) exportUnpaired(e *entry, now time.Time, why Reason, emit Emit) {
	if !e.alreadyReported() {
		t.export(e, now, why, emit)
		return
	}
	if t.OnAlreadyReported != nil {
		t.OnAlreadyReported()
	}
	e.updated = false
	e.activeDeadline = now.Add(t.s.ActiveTimeout).UnixNano()
}

// enforceBound exports early and forgets the connections whose deadlines are
// nearest while more than MaxRecords are held. Ready connections come first
// in practice (their active deadline is nearer than a pending half's pairing
// deadline); what has nothing new since its last export is forgotten without
// an export, since nothing of it is unreported.
func (t *Table) enforceBound(now time.Time, emit Emit) {
	for t.s.MaxRecords > 0 && len(t.entries) > t.s.MaxRecords {
		e := t.queue.pop()
		t.forget(e)
		t.exportRemoved(e, now, ReasonEvicted, emit)
	}
}

// exportRemoved exports what is unreported of e, already out of the queue
// and the table (a pending half as unpaired; a paired entry only if it has
// something new since its last export), then releases it. A connection that
// is replaced and one evicted by the bound leave the table alike but for
// the reason they are exported with.
func (t *Table) exportRemoved(e *entry, now time.Time, why Reason, emit Emit) {
	switch {
	case !e.ready:
		t.pending--
		t.exportUnpaired(e, now, why, emit)
	case e.updated:
		t.export(e, now, why, emit)
	}
	t.release(e)
}

// Flush exports everything held that has not been reported (pending halves
// as unpaired) and empties the table.
func (t *Table) Flush(now time.Time, emit Emit) {
	for _, e := range t.queue {
		switch {
		case !e.ready:
			t.exportUnpaired(e, now, ReasonFlush, emit)
		case e.updated:
			t.export(e, now, ReasonFlush, emit)
		}
	}
	clear(t.entries)
	clear(t.replaced)
	clear(t.queue)
	t.pending = 0
	t.queue = t.queue[:0]
	t.free, t.labels = freeList[*entry]{}, freeList[map[string]string]{}
}

// export hands a snapshot of e to emit, then starts a new reporting period:
// deltas and throughputs reset, next periodic export one active timeout away.
func (t *Table) export(e *entry, now time.Time, why Reason, emit Emit) {
	if e.relay {
		t.foldRelay(e, now, why)
		return
	}
	// The entry's record is handed out as it is (no copy of a kilobyte per
	// export): the fields set here are only read by exports.
	r := &e.rec
	r.Observed = now
	r.Correlation = e.state()
	r.Evicted = why == ReasonEvicted
	if e.paired {
		// Both Nodes reported it; they are named in the endpoints.
		r.Reporter = flowrecord.Reporter{Side: flowrecord.SideBoth}
	}
	// One end of flow per connection: until every side that reported it
	// ended, a periodic export is an active-timeout one; a last export
	// (inactive, flush, eviction, replacement) carries the end when a side
	// reported it.
	reason := r.EndReason
	if reason == flowrecord.EndReasonEndOfFlow && !e.allSidesEnded() && (why == ReasonReady || why == ReasonActiveTimeout || why == ReasonPairingTimeout) {
		r.EndReason = flowrecord.EndReasonActiveTimeout
	}
	emit(r, why)
	e.endSent = e.endSent || r.EndReason == flowrecord.EndReasonEndOfFlow
	r.EndReason = reason
	resetAfterExport(e)
	e.updated = false
	e.exported = true
	e.activeDeadline = now.Add(t.s.ActiveTimeout).UnixNano()
}

// foldRelay stands for an export of a relay leg's entry (the onward leg a
// NodePort's Node sent to a third Node, and that Node's half): the
// connection is exported under its first leg's key, so this one only
// counts, and starts a new reporting period like an export.
func (t *Table) foldRelay(e *entry, now time.Time, why Reason) {
	if t.OnRelayFolded != nil {
		t.OnRelayFolded(why)
	}
	resetAfterExport(e)
	e.updated = false
	e.exported = true
	e.activeDeadline = now.Add(t.s.ActiveTimeout).UnixNano()
}
