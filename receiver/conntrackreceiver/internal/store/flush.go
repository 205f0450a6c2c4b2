package store

import "time"

// Flush exports, at shutdown, everything the store holds that no record has
// reported yet: the end-of-flow record of every connection already gone or
// dying, and the deltas of every live connection that changed since its
// previous export (an active-timeout record). Unchanged live connections get
// nothing (their deltas are zero). It appends to dst.
func (s *Store) Flush(now time.Time, dst []Export) []Export {
	n := now.UnixNano()
	for _, e := range s.conns {
		// No poll follows to confirm that an entry the latest dump missed
		// ended; a complete dump rarely misses a live one, so it is ended
		// with the counters it last had rather than left unreported.
		if e.missed > 0 {
			e.gone = true
		}
		if e.readyToDelete || !(e.dying() || e.changed()) {
			continue
		}
		// Due now: Expired then decides the record as at any expiry.
		e.activeExpire = n
		if e.index >= 0 {
			s.queue.fix(e.index)
		} else {
			s.queue.push(e)
		}
	}
	return s.Expired(now, dst)
}
