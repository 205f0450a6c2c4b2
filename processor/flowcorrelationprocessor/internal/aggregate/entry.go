package aggregate

import (
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// entry is one connection held by the table: the record built from its
// halves, its per-Node statistics and its deadlines.
type entry struct {
	rec flowrecord.Record // Aggregation points at agg; Key is the table's key; Observed, Correlation, Evicted and Reporter are set by export
	agg flowrecord.Aggregation
	// sourceLow and destinationLow are each side's counter spans' lowest
	// starts (see ledger.go); the deltas in rec and agg are what is not
	// exported yet.
	sourceLow, destinationLow lows
	// commonFrom is where the common counters' span starts (see ledger.go).
	commonFrom lows
	// peerStart is the flow start the other half's Node reported, in Unix
	// ns (0: none); the first half's is rec.Start. Each is on its own Node's
	// clock. They tell a record of a new connection on the same tuple from
	// this one's (see reuse.go). An int64, not a time.Time: the entry stays
	// in its allocation size class.
	peerStart int64

	first    half // the half of the first record, for the same-side test
	required bool // the connection has two halves to pair
	paired   bool // both halves seen
	ready    bool // exportable: paired, not required, or exported unpaired
	updated  bool // new data since the last export
	exported bool // exported at least once (by this process)
	// sourceEnded, destinationEnded: that side reported the end of the
	// flow; endSent: a record with end reason end-of-flow went out.
	sourceEnded, destinationEnded, endSent bool
	// relay: one half is a relay leg (flowrecord.SideRelay); the connection
	// is reported under its first leg's key, so this entry is never exported.
	relay bool

	// pairingDeadline is when a pending half is exported unpaired: its
	// arrival plus the pairing timeout (the arrival is not kept apart).
	// Deadlines are Unix ns, not time.Time: the entry stays in its
	// allocation size class.
	pairingDeadline  int64
	activeDeadline   int64 // ready: re-export then, if updated
	inactiveDeadline int64 // ready: forget then (after a last export if updated)

	due   int64 // heap order, Unix ns; may be earlier than the real next deadline
	index int   // position in the heap
}

// state is the correlation state an export of e carries.
func (e *entry) state() flowrecord.CorrelationState {
	switch {
	case e.paired:
		return flowrecord.CorrelationPaired
	case !e.required:
		return flowrecord.CorrelationNotRequired
	default:
		return flowrecord.CorrelationUnpaired
	}
}

// alreadyReported: e, a half that never paired, is the end of a connection
// its Node reported before, and carries nothing else: its end of flow came
// with every delta 0 while its totals are not (all-zero totals say nothing
// either way, as with conntrack accounting off, and are exported).
func (e *entry) alreadyReported() bool {
	s, r := &e.rec.Stats, &e.rec.ReverseStats
	if e.rec.EndReason != flowrecord.EndReasonEndOfFlow ||
		s.PacketDelta != 0 || s.OctetDelta != 0 || r.PacketDelta != 0 || r.OctetDelta != 0 {
		return false
	}
	return s.PacketTotal != 0 || s.OctetTotal != 0 || r.PacketTotal != 0 || r.OctetTotal != 0
}

// nextDeadline is when e next needs attention.
func (e *entry) nextDeadline() int64 {
	if !e.ready {
		return e.pairingDeadline
	}
	return min(e.activeDeadline, e.inactiveDeadline)
}

// deadlineQueue is a min-heap of entries by due time. Deadlines that move
// later are not re-sorted (the entry is looked at early and pushed back);
// deadlines that move earlier are, so nothing is ever late. It is typed (no
// container/heap): no interface calls, and due compares as an integer.
type deadlineQueue []*entry

func (q deadlineQueue) less(i, j int) bool { return q[i].due < q[j].due }

func (q deadlineQueue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

// up moves the entry at i towards the root while it is due before its parent.
func (q deadlineQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down moves the entry at i away from the root, among the first n, while a
// child is due before it; it reports whether it moved.
func (q deadlineQueue) down(i, n int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= n || child < 0 {
			break
		}
		if right := child + 1; right < n && q.less(right, child) {
			child = right
		}
		if !q.less(child, i) {
			break
		}
		q.swap(i, child)
		i = child
	}
	return i > start
}

// push adds e, its due set.
func (q *deadlineQueue) push(e *entry) {
	e.index = len(*q)
	*q = append(*q, e)
	q.up(e.index)
}

// remove takes out the entry at i and returns it.
func (q *deadlineQueue) remove(i int) *entry {
	n := len(*q) - 1
	if i != n {
		q.swap(i, n)
		if !q.down(i, n) {
			q.up(i)
		}
	}
	old := *q
	e := old[n]
	old[n] = nil
	e.index = -1
	*q = old[:n]
	return e
}

// pop takes out the entry due first.
func (q *deadlineQueue) pop() *entry { return q.remove(0) }

// fix restores the order after the due of the entry at i changed.
func (q deadlineQueue) fix(i int) {
	if !q.down(i, len(q)) {
		q.up(i)
	}
}

// reschedule moves e earlier in the queue when its next deadline is earlier
// than its place.
func (q deadlineQueue) reschedule(e *entry) {
	if d := e.nextDeadline(); d < e.due {
		e.due = d
		q.up(e.index)
	}
}

// noteEnd records which sides r, a record of half h, ended.
func (e *entry) noteEnd(r *flowrecord.Record, h half) {
	if r.EndReason != flowrecord.EndReasonEndOfFlow {
		return
	}
	src, dst := sidesOf(e.required, h)
	e.sourceEnded = e.sourceEnded || src
	e.destinationEnded = e.destinationEnded || dst
}

// allSidesEnded: every side that reported the connection reported its end.
// A pair ends when both Nodes say so: the first end to arrive is only the
// first Node's, and the other Node may still count (its end record comes
// up to a poll and an export period later).
// A denied connection ends with its denial: the denying Node's record is its
// end (the other Node's conntrack entry lingers, unanswered, for minutes).
func (e *entry) allSidesEnded() bool {
	if denied(e.rec.IngressPolicy.RuleAction) || denied(e.rec.EgressPolicy.RuleAction) {
		return e.sourceEnded || e.destinationEnded
	}
	src, dst := !e.agg.EndFromSource.IsZero(), !e.agg.EndFromDestination.IsZero()
	return (!src || e.sourceEnded) && (!dst || e.destinationEnded)
}

func denied(a flowrecord.RuleAction) bool {
	return a == flowrecord.RuleActionDrop || a == flowrecord.RuleActionReject
}
