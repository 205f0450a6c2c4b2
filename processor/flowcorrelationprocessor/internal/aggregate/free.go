package aggregate

// Entries are recycled: a forgotten connection's entry, zeroed, holds the
// next new one, so a table at a steady rate of connections allocates none
// (an entry is about 1.4 KB; one per connection was a fifth of the bytes
// the processor allocated per pair). What is kept is bounded by the
// churn between two Expire calls: entries no insert took during a whole
// interval between two calls are let go at the next.

// freeList is the table's zeroed free entries.
type freeList struct {
	entries []*entry
	// low is the fewest entries free since the last mark: that many were
	// not needed in the interval.
	low int
}

// take returns a zeroed entry: a free one, else a new one.
func (s *freeList) take() *entry {
	n := len(s.entries)
	if n == 0 {
		return new(entry)
	}
	e := s.entries[n-1]
	s.entries[n-1] = nil
	s.entries = s.entries[:n-1]
	s.low = min(s.low, n-1)
	return e
}

// put zeroes e, out of the table and exported, so it holds nothing of its
// connection (no strings or maps kept alive, no field leaks into the next),
// and keeps it.
func (s *freeList) put(e *entry) {
	*e = entry{}
	s.entries = append(s.entries, e)
}

// trim lets go of the entries no take needed since the last mark.
func (s *freeList) trim() {
	keep := len(s.entries) - s.low
	clear(s.entries[keep:])
	s.entries = s.entries[:keep]
	s.low = 0
}

// mark starts an interval: what is free now and not taken before the next
// trim goes then.
func (s *freeList) mark() { s.low = len(s.entries) }
