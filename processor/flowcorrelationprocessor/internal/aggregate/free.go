package aggregate

// Entries are recycled: a forgotten connection's entry, zeroed, holds the
// next new one, so a table at a steady rate of connections allocates none
// (an entry is about 1.4 KB; one per connection was a fifth of the bytes
// the processor allocated per pair). So are, when the caller hands them
// over (Settings.RecycleLabels), the label maps of forgotten connections,
// for the caller's next decodes. What is kept is bounded by the churn
// between two Expire calls: what nothing took during a whole interval
// between two calls is let go at the next.

// freeList is what is kept of one kind.
type freeList[T any] struct {
	items []T
	// low is the fewest items free since the last mark: that many were
	// not needed in the interval.
	low int
}

// take returns a free item, if there is one.
func (s *freeList[T]) take() (T, bool) {
	n := len(s.items)
	if n == 0 {
		var zero T
		return zero, false
	}
	x := s.items[n-1]
	clear(s.items[n-1:])
	s.items = s.items[:n-1]
	s.low = min(s.low, n-1)
	return x, true
}

// put keeps x, which the caller emptied.
func (s *freeList[T]) put(x T) { s.items = append(s.items, x) }

// trim lets go of the items nothing took since the last mark.
func (s *freeList[T]) trim() {
	keep := len(s.items) - s.low
	clear(s.items[keep:])
	s.items = s.items[:keep]
	s.low = 0
}

// mark starts an interval: what is free now and not taken before the next
// trim goes then.
func (s *freeList[T]) mark() { s.low = len(s.items) }

// maxRecycledLabels bounds the maps kept: a small map (one group of the
// runtime's map) is worth keeping, a large one is left to the collector.
const maxRecycledLabels = 8

// newEntry is a zeroed entry: a free one, else a new one.
func (t *Table) newEntry() *entry {
	if e, ok := t.free.take(); ok {
		return e
	}
	return new(entry)
}

// release keeps e, out of the table and exported, for a next connection:
// zeroed, so it holds nothing of its connection (no strings or maps kept
// alive, no field leaks into the next), and its label maps cleared.
func (t *Table) release(e *entry) {
	if t.s.RecycleLabels {
		t.keepLabels(e.rec.Source.PodLabels)
		t.keepLabels(e.rec.Destination.PodLabels)
	}
	*e = entry{}
	t.free.put(e)
}

func (t *Table) keepLabels(m map[string]string) {
	if m == nil || len(m) > maxRecycledLabels {
		return
	}
	clear(m)
	t.labels.put(m)
}

// TakeLabels returns an empty label map of a forgotten connection, nil when
// there is none (see Settings.RecycleLabels).
func (t *Table) TakeLabels() map[string]string {
	m, _ := t.labels.take()
	return m
}

// trimFree lets go of what no insert or TakeLabels needed in the interval
// since the last Expire, and starts the next.
func (t *Table) trimFree() {
	t.free.trim()
	t.labels.trim()
}

func (t *Table) markFree() {
	t.free.mark()
	t.labels.mark()
}
