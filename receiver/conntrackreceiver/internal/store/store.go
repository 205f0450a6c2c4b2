package store

import (
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Config holds the store's timers and bound.
type Config struct {
	// ActiveTimeout is how often a connection that keeps changing is exported.
	ActiveTimeout time.Duration
	// IdleTimeout is how long a connection may stay unchanged before one last
	// idle record is exported and it leaves the expiry queue.
	IdleTimeout time.Duration
	// StaleTimeout removes a connection gone from conntrack whose final record
	// could not be exported within this time since its last export.
	StaleTimeout time.Duration
	// MaxConnections bounds the store; 0 means no bound. New connections over
	// the bound are shed (counted by Observe's caller).
	MaxConnections int
}

// entry is one stored connection and its export state. Times are Unix
// nanoseconds: they are compared often and stored for every connection.
type entry struct {
	conn Conn
	// ident is the conntrack entry the connection was last read from (next
	// to conn's counters, which Observe reads too); replaced, the connection
	// this one replaced on its key (tuple reuse): a late DESTROY event for it
	// changes nothing.
	ident, replaced identity
	// prev is what the last export reported (Antrea's Prev* fields).
	prevOrig, prevReply Counters
	prevTCPState        uint8

	firstSeen, lastSeen, lastExport int64
	activeExpire, idleExpire        int64

	index   int    // position in the expiry heap, -1 when not queued
	heapKey int64  // the expiry the heap orders it by (see expiryHeap)
	seen    uint64 // the poll generation that last saw the entry
	// missed counts the completed dumps in a row that did not hold the entry.
	missed uint8

	// frozen: conntrack said the connection is dying (TIME_WAIT/CLOSE/DYING);
	// later observations are ignored, as Antrea does.
	frozen bool
	// gone: the entry vanished from conntrack (or a DESTROY event said so).
	gone bool
	// readyToDelete: the final (end-of-flow) record was exported.
	readyToDelete bool
	// exported: at least one record went out. A connection never exported
	// counts as active (Antrea starts new connections active).
	exported bool
	// detached: a newer connection holds the key; this one waits in the queue
	// for its end-of-flow record only and leaves the store with it.
	detached bool
	// closedSaved: its end-of-flow record went out while conntrack still
	// held it, so a checkpoint may hold it as closed; its deletion is
	// reported (TakeForgotten) for that to be removed.
	closedSaved bool
}

// missedDumpsForGone is how many dumps in a row must lack a connection before
// it is taken for gone. A netlink dump is not a snapshot: an entry that moves
// in the kernel's hash table while the dump runs can be missing from it, so a
// single absence is not the end of a connection. A DESTROY event is.
const missedDumpsForGone = 2

// identity tells two conntrack entries of one tuple and zone apart: the
// kernel's ID, and the start timestamp, because the ID is a hash that a new
// entry repeats when it reuses the memory of the one it replaced (a UDP flow
// after its timeout usually does). Zero values are unknown and match any.
type identity struct {
	id    uint32
	start int64
}

func identityOf(c *Conn) identity { return identity{id: c.ID, start: c.Start} }

func (a identity) differs(b identity) bool {
	return (a.id != 0 && b.id != 0 && a.id != b.id) || (a.start != 0 && b.start != 0 && a.start != b.start)
}

// sameConnection reports whether c is a later observation of e's connection.
// Another conntrack entry on the same tuple is a new connection reusing it (a
// UDP flow after its timeout, a SYN on a TIME_WAIT entry), unless the zone
// differs too: then the antrea profile moved the connection between its zone-0
// and CNI-zone entries, which are two entries of one connection.
func (e *entry) sameConnection(c *Conn) bool {
	return e.conn.Zone != c.Zone || !e.ident.differs(identityOf(c))
}

func (e *entry) expiryNanos() int64 { return min(e.activeExpire, e.idleExpire) }

// changed reports whether the connection changed since its last export:
// packets or TCP state (Antrea's IsActive test), or bytes.
func (e *entry) changed() bool {
	c := &e.conn
	return !e.exported || c.Orig != e.prevOrig || c.Reply != e.prevReply || (c.IsTCP() && c.TCPState != e.prevTCPState)
}

func (e *entry) dying() bool { return e.gone || e.conn.Dying() }

// Export is one record's worth of a connection, taken at export time.
type Export struct {
	Conn Conn
	// Start is the conntrack start time, or when the store first saw the
	// connection if conntrack timestamps are off.
	Start time.Time
	// End is the conntrack stop time of a dying entry, else the last poll (or
	// event) that observed the connection.
	End time.Time
	// OrigDelta and ReplyDelta count what happened since the previous export,
	// clamped at 0 when a counter went backwards.
	OrigDelta, ReplyDelta Counters
	Reason                flowrecord.EndReason
	// KernelStart is the conntrack start timestamp itself, 0 when conntrack
	// timestamps are off (Start then is the store's first sight). A restarted
	// receiver matches saved state by it (see Resume).
	KernelStart int64
	// Lingers: an end-of-flow record of a connection conntrack may still
	// hold (dying, not known gone): a receiver restarted before it leaves
	// the table must know it was reported (Exported.Closed).
	Lingers bool
}

// PollStats summarises one poll's effect on the store.
type PollStats struct {
	// Replaced counts connections ended because another conntrack entry took
	// their tuple.
	Observed, New, Shed, Gone, Replaced, Deleted int
	// Stale counts gone connections removed before their final record could
	// be exported (StaleTimeout passed); the caller counts them as lost.
	Stale int
}

// TakeForgotten returns the connections deleted since the previous call
// whose end-of-flow record went out while conntrack still held them (their
// saved closed state is no longer needed), appending to dst.
func (s *Store) TakeForgotten(dst []Exported) []Exported {
	dst = append(dst, s.forgotten...)
	s.forgotten = s.forgotten[:0]
	return dst
}

// Store holds the connections of one conntrack table.
type Store struct {
	cfg   Config
	conns map[Key]*entry
	queue expiryHeap
	gen   uint64
	now   int64
	stats PollStats
	// free holds deleted entries for reuse: a steady churn of connections
	// then allocates nothing.
	free []*entry
	// resume is what a previous run exported (resume.go); nil once resumed.
	resume *resumeState
	// forgotten are deleted connections whose closed state may be saved
	// (TakeForgotten).
	forgotten []Exported
}

// New returns an empty store.
func New(cfg Config) *Store {
	return &Store{cfg: cfg, conns: make(map[Key]*entry), queue: make(expiryHeap, 0, 1024)}
}

// Len is the number of connections held.
func (s *Store) Len() int { return len(s.conns) }

// Queued is the number of connections waiting in the expiry queue.
func (s *Store) Queued() int { return len(s.queue) }

// BeginPoll starts applying a fresh dump taken at now. Every connection the
// dump holds must then be passed to Observe, and the dump closed with EndPoll.
func (s *Store) BeginPoll(now time.Time) {
	s.gen++
	s.now = now.UnixNano()
	s.stats = PollStats{}
}

// Observe applies one dumped conntrack entry. It returns false when the entry
// is a new connection that did not fit under MaxConnections (shed).
func (s *Store) Observe(c *Conn) bool {
	s.stats.Observed++
	e, ok := s.conns[c.Key]
	var replaced identity
	if ok && !e.sameConnection(c) {
		// A new connection reusing the tuple: the old one ends with its own
		// last counters, the new one starts with its own.
		replaced = e.ident
		s.retire(e)
		ok = false
	}
	if !ok {
		e = s.insert(c, true)
		if e == nil {
			return false
		}
		e.seen = s.gen
		e.replaced = replaced
		return true
	}
	e.seen = s.gen
	e.missed = 0
	e.lastSeen = s.now
	if e.frozen || e.readyToDelete {
		// Frozen once dying: the exported end-of-flow state stays the truth.
		return true
	}
	moved := c.Orig != e.conn.Orig || c.Reply != e.conn.Reply || c.TCPState != e.conn.TCPState
	s.update(e, c)
	switch {
	case e.index < 0 && e.changed():
		// It went idle earlier and is active again: back in the queue.
		e.activeExpire = s.now + int64(s.cfg.ActiveTimeout)
		e.idleExpire = s.now + int64(s.cfg.IdleTimeout)
		s.queue.push(e)
	case e.index >= 0 && moved:
		// Traffic since the previous poll: the idle clock restarts. The heap
		// is not fixed (see expiryHeap).
		e.idleExpire = s.now + int64(s.cfg.IdleTimeout)
	}
	return true
}

// update copies a fresh observation into e, keeping what the first
// observation knew when the new one does not.
func (s *Store) update(e *entry, c *Conn) {
	start := e.conn.Start
	e.conn = *c
	e.ident = identityOf(c)
	if e.conn.Start == 0 {
		e.conn.Start = start
	}
	if e.conn.Dying() {
		e.frozen = true
	}
}

// insert adds c as a new connection, queued for its first export. held puts
// it under its key; a connection that is not held only waits for its
// end-of-flow record.
func (s *Store) insert(c *Conn, held bool) *entry {
	if s.cfg.MaxConnections > 0 && len(s.conns) >= s.cfg.MaxConnections {
		s.stats.Shed++
		return nil
	}
	s.stats.New++
	var e *entry
	if n := len(s.free); n > 0 {
		e = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		e = new(entry)
	}
	*e = entry{conn: *c, ident: identityOf(c), firstSeen: s.now, lastSeen: s.now, index: -1}
	if e.conn.Start == 0 {
		e.conn.Start = s.now
	}
	e.lastExport = e.conn.Start
	e.frozen = e.conn.Dying()
	e.activeExpire = s.now + int64(s.cfg.ActiveTimeout)
	e.idleExpire = s.now + int64(s.cfg.IdleTimeout)
	s.resumeInto(e)
	if held {
		s.conns[c.Key] = e
	} else {
		e.detached = true
	}
	if !e.readyToDelete { // a resumed closed connection has nothing left to export
		s.queue.push(e)
	}
	return e
}

// retire ends the connection held as e because another connection takes its
// key: deleted if its final record went out, else detached and queued for its
// end-of-flow record now.
func (s *Store) retire(e *entry) {
	s.stats.Replaced++
	if e.readyToDelete {
		s.delete(e)
		return
	}
	delete(s.conns, e.conn.Key)
	e.detached = true
	s.end(e, s.now)
}

// end marks e gone and queues its end-of-flow record at n.
func (s *Store) end(e *entry, n int64) {
	e.gone = true
	e.frozen = true
	if e.index >= 0 {
		s.queue.remove(e)
	}
	e.activeExpire, e.idleExpire = n, n
	s.queue.push(e)
}

func (s *Store) delete(e *entry) {
	if e.index >= 0 {
		s.queue.remove(e)
	}
	if !e.detached {
		delete(s.conns, e.conn.Key)
	}
	s.stats.Deleted++
	if e.closedSaved {
		s.forgotten = append(s.forgotten, Exported{Key: e.conn.Key, ID: e.conn.ID, Start: e.ident.start})
	}
	if len(s.free) < 4096 {
		s.free = append(s.free, e)
	}
}

// EndPoll finishes a poll: connections missing from missedDumpsForGone dumps
// in a row are gone (a DESTROY event says so at once). A gone connection whose
// final record went out is deleted; one seen gone for the first time is
// queued for its end-of-flow record right away; one gone and unexported past
// StaleTimeout is removed.
func (s *Store) EndPoll() PollStats {
	stale := int64(s.cfg.StaleTimeout)
	for _, e := range s.conns {
		if e.seen == s.gen {
			continue
		}
		if !e.gone {
			if e.missed < missedDumpsForGone {
				e.missed++
			}
			if e.missed < missedDumpsForGone {
				continue
			}
		}
		switch {
		case e.readyToDelete:
			s.delete(e)
		case !e.gone:
			// Its end is known now: the end-of-flow record goes out at once
			// (Antrea waits for the next expiry, and never reports an idle one).
			s.stats.Gone++
			s.end(e, s.now)
		case stale > 0 && s.now-e.lastExport >= stale:
			s.delete(e)
			s.stats.Stale++
		}
	}
	return s.stats
}

// FinalResult says what a DESTROY event did to the store.
type FinalResult uint8

const (
	// FinalApplied: the event ended a connection, with the event's counters.
	FinalApplied FinalResult = iota
	// FinalAlreadyEnded: the event's connection had already had its
	// end-of-flow record (from polling), so the event changed nothing.
	FinalAlreadyEnded
	// FinalShed: the event's connection was new to the store and did not fit
	// under MaxConnections.
	FinalShed
)

// Final applies a conntrack DESTROY event (the entry's last counters) at now.
// A connection the store never saw (opened and closed between two polls) is
// added so that its only record is an end-of-flow one.
func (s *Store) Final(c *Conn, now time.Time) FinalResult {
	n := now.UnixNano()
	e, ok := s.conns[c.Key]
	held := true
	switch {
	case ok && e.sameConnection(c):
		if e.readyToDelete {
			return FinalAlreadyEnded
		}
	case ok && e.replaced != (identity{}) && !e.replaced.differs(identityOf(c)):
		// The connection a newer one replaced on this tuple: polling
		// already ended it.
		return FinalAlreadyEnded
	case ok && e.readyToDelete:
		// A connection no poll saw, after the held one's end went out.
		s.delete(e)
		ok = false
	case ok:
		// A connection no poll saw, beside the held one (which started
		// after it or has not had its own DESTROY yet): its own record.
		ok, held = false, false
	}
	if !ok {
		s.now = n
		if e = s.insert(c, held); e == nil {
			return FinalShed
		}
		// Not part of any poll: keep the next EndPoll from treating its
		// absence as news.
		e.seen = s.gen
	} else {
		// The event's counters are the connection's last, also when a dump
		// already missed it (it was destroyed while the dump ran) or saw it
		// dying: its end-of-flow record has not gone out yet.
		s.update(e, c)
	}
	e.lastSeen = n
	if e.conn.Stop == 0 {
		e.conn.Stop = n
	}
	s.end(e, n)
	return FinalApplied
}

// NextExpiry returns a time no later than the earliest export due.
func (s *Store) NextExpiry() (time.Time, bool) { return s.queue.peekKey() }

// Expired exports every connection due at now (its active or idle expiry
// passed), appending to dst. For each: a dying one gets its end-of-flow record
// (3) and leaves the queue for good; one unchanged since its previous export
// gets an idle record (1) and leaves the queue until it changes again; any
// other gets an active-timeout record (2) and is re-queued one active timeout
// later. Deltas are against the previous export.
func (s *Store) Expired(now time.Time, dst []Export) []Export {
	n := now.UnixNano()
	for len(s.queue) > 0 && s.queue[0].heapKey <= n {
		e := s.queue[0]
		if e.expiryNanos() > n {
			s.queue.fix(0) // its idle expiry moved on since it was placed
			continue
		}
		s.queue.remove(e)
		if e.missed > 0 && !e.dying() {
			// The latest dump missed it: the next poll tells whether it
			// ended, so its record waits for that poll rather than going
			// out now and being followed at once by its end.
			e.activeExpire, e.idleExpire = max(e.activeExpire, n+1), max(e.idleExpire, n+1)
			s.queue.push(e)
			continue
		}
		x := Export{Conn: e.conn, Start: time.Unix(0, e.conn.Start), KernelStart: e.ident.start}
		if e.conn.Stop != 0 {
			x.End = time.Unix(0, e.conn.Stop)
		} else {
			x.End = time.Unix(0, e.lastSeen)
		}
		x.OrigDelta = delta(e.conn.Orig, e.prevOrig)
		x.ReplyDelta = delta(e.conn.Reply, e.prevReply)
		// Antrea's IsActive: anything new since the previous export? An
		// unchanged connection gets an idle record, whichever timer fired.
		idle := !e.changed()
		e.prevOrig, e.prevReply, e.prevTCPState = e.conn.Orig, e.conn.Reply, e.conn.TCPState
		e.lastExport = n
		e.exported = true
		switch {
		case e.dying():
			x.Reason = flowrecord.EndReasonEndOfFlow
			e.readyToDelete = true
			// Not known gone: TIME_WAIT, CLOSE, or missed by a dump with no
			// poll to confirm it (the shutdown flush).
			x.Lingers = !e.gone || e.missed > 0
			e.closedSaved = x.Lingers
			if e.detached {
				s.delete(e) // no dump can see it again under its key
			}
		case idle:
			x.Reason = flowrecord.EndReasonIdleTimeout
		default:
			x.Reason = flowrecord.EndReasonActiveTimeout
			e.activeExpire = n + int64(s.cfg.ActiveTimeout)
			if e.idleExpire <= n {
				e.idleExpire = n + int64(s.cfg.IdleTimeout)
			}
			s.queue.push(e)
		}
		dst = append(dst, x)
	}
	return dst
}

func delta(cur, prev Counters) Counters {
	var d Counters
	if cur.Packets > prev.Packets {
		d.Packets = cur.Packets - prev.Packets
	}
	if cur.Bytes > prev.Bytes {
		d.Bytes = cur.Bytes - prev.Bytes
	}
	return d
}
