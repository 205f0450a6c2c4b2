package store

import "time"

// expiryHeap is a min-heap of entries ordered by heapKey, the expiry an entry
// had when it was last placed. Each entry knows its index, so it can be
// re-placed (fix) or removed in O(log n). An entry's real expiry may since
// have moved later (traffic pushes the idle expiry on every poll); the heap is
// not fixed for that — the key only ever grows, so the top is still never
// later than the earliest real expiry, and Store.Expired re-places a top whose
// real expiry is not due. That saves a heap fix per connection per poll.
// Written out rather than on container/heap to avoid boxing entries.
type expiryHeap []*entry

func (h expiryHeap) less(i, j int) bool { return h[i].heapKey < h[j].heapKey }

func (h expiryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *expiryHeap) push(e *entry) {
	e.heapKey = e.expiryNanos()
	e.index = len(*h)
	*h = append(*h, e)
	h.up(e.index)
}

// remove takes e out of the heap; e.index becomes -1.
func (h *expiryHeap) remove(e *entry) {
	i := e.index
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last && !h.down(i) {
		h.up(i)
	}
	e.index = -1
}

// fix re-places the entry at i under its current expiry.
func (h expiryHeap) fix(i int) {
	h[i].heapKey = h[i].expiryNanos()
	if !h.down(i) {
		h.up(i)
	}
}

// peekKey returns the smallest heap key: no entry expires earlier. ok is
// false when the heap is empty.
func (h expiryHeap) peekKey() (time.Time, bool) {
	if len(h) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, h[0].heapKey), true
}

func (h expiryHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h expiryHeap) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n || l < 0 {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
