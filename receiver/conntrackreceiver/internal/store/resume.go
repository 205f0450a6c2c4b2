package store

// Exported is what the last record of a connection reported: its conntrack
// ID and tuple, the totals the deltas were taken against, and when. A
// restarted receiver hands these back (Resume) so that its first delta of a
// connection it already reported does not repeat the connection's history.
type Exported struct {
	Key
	ID          uint32
	Orig, Reply Counters
	TCPState    uint8
	// Start is the conntrack start timestamp (0: unknown). The kernel repeats
	// an ID when a new entry reuses the memory of the one it replaced, so the
	// ID and tuple alone could resume a new connection from an old one's totals.
	Start int64
	// At is the export time, Unix nanoseconds.
	At int64
	// Closed: the export was the connection's end-of-flow record while
	// conntrack still held it (TIME_WAIT, CLOSE: up to minutes). A restarted
	// receiver that finds it so holds it as ended, never to be reported again.
	Closed bool
}

// ExportedOf is the Exported state an export leaves: its totals become the
// base of the connection's next delta.
func ExportedOf(x *Export, at int64) Exported {
	c := &x.Conn
	return Exported{Key: c.Key, ID: c.ID, Orig: c.Orig, Reply: c.Reply, TCPState: c.TCPState, Start: x.KernelStart, At: at,
		Closed: x.Lingers}
}

// resumeState holds what a previous run exported, by conntrack ID, until the
// connections are seen again.
type resumeState struct {
	byID    map[uint32]Exported
	resumed int
	// closed counts the connections found again whose end-of-flow record
	// the previous run exported: held as ended, not reported again.
	closed int
}

// Resume loads what a previous run of the receiver last exported. It must be
// called before the first poll. A connection then first seen with the same
// conntrack ID and tuple goes on from those totals: its next delta counts
// only what happened since.
func (s *Store) Resume(xs []Exported) {
	s.resume = &resumeState{byID: make(map[uint32]Exported, len(xs))}
	for _, x := range xs {
		if x.ID != 0 {
			s.resume.byID[x.ID] = x
		}
	}
}

// ResumeResult is what a resume found after the first complete poll.
type ResumeResult struct {
	// Resumed live connections go on from their saved totals.
	Resumed int
	// Closed connections had their end-of-flow record from the previous run;
	// found still closing, they are held as ended and never reported again
	// (or they are gone since: nothing is left of them).
	Closed int
	// Ended connections were live when the previous run last exported them
	// and are gone now: they ended while no receiver ran, and their last
	// deltas are lost (conntrack has no record of them any more).
	Ended []Exported
	// Forget are the saved connections no longer needed: the ended ones and
	// the closed ones conntrack no longer holds.
	Forget []Exported
}

// EndResume is called after the first complete poll: every connection the
// previous run saved is resumed by now, or found closing, or gone.
func (s *Store) EndResume() ResumeResult {
	if s.resume == nil {
		return ResumeResult{}
	}
	res := ResumeResult{Resumed: s.resume.resumed, Closed: s.resume.closed}
	for _, x := range s.resume.byID {
		if x.Closed {
			res.Closed++ // and gone since: nothing left of it
		} else {
			res.Ended = append(res.Ended, x)
		}
		res.Forget = append(res.Forget, x)
	}
	s.resume = nil
	return res
}

// resumeInto makes a newly inserted entry go on from its previous run's last
// export, when there is one for the same conntrack ID and tuple.
func (s *Store) resumeInto(e *entry) {
	if s.resume == nil || e.conn.ID == 0 {
		return
	}
	x, ok := s.resume.byID[e.conn.ID]
	if !ok || !sameTuple(&x.Key, &e.conn.Key) || e.ident.differs(identity{id: x.ID, start: x.Start}) {
		return
	}
	delete(s.resume.byID, e.conn.ID)
	e.prevOrig, e.prevReply, e.prevTCPState = x.Orig, x.Reply, x.TCPState
	e.exported = true
	e.lastExport = x.At
	if x.Closed {
		// Its end went out: frozen at what was reported, deleted (and its
		// saved state forgotten) once conntrack no longer holds it.
		s.resume.closed++
		e.conn.Orig, e.conn.Reply, e.conn.TCPState = x.Orig, x.Reply, x.TCPState
		e.frozen, e.readyToDelete, e.closedSaved = true, true, true
		return
	}
	s.resume.resumed++
}

// sameTuple compares the 5-tuple (a conntrack ID is only unique among live
// entries; the tuple guards against an ID reused by another connection).
func sameTuple(a, b *Key) bool {
	return a.Src == b.Src && a.Dst == b.Dst && a.SrcPort == b.SrcPort && a.DstPort == b.DstPort && a.Proto == b.Proto
}
