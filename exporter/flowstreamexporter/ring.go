package flowstreamexporter

import (
	"sync"

	"github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// entry is one record in the ring: the typed record (filters and redaction
// work on it) and its unredacted wire form, converted once and shared by
// every stream that may see it in full. Neither is modified after Push.
type entry struct {
	rec  *flowrecord.Record
	flow *flowstreampb.Flow
}

// ring is a broadcast ring buffer: one writer, any number of readers, each
// with its own cursor. Writing never waits for a reader; a reader that falls
// more than the capacity behind loses the oldest records and is told how
// many.
type ring struct {
	epoch  string // names this ring's sequence numbers (resume tokens)
	mu     sync.RWMutex
	slots  []entry
	next   uint64        // sequence number of the next record written
	wake   chan struct{} // closed (and replaced) when records are written
	closed bool
}

func newRing(size int) *ring {
	return &ring{epoch: newEpoch(), slots: make([]entry, size), wake: make(chan struct{})}
}

// capacity is how many records the ring holds.
func (r *ring) capacity() uint64 { return uint64(len(r.slots)) }

// written is how many records the ring has ever been given: the sequence
// number of the next one.
func (r *ring) written() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.next
}

// push writes a batch and wakes the readers waiting for it.
func (r *ring) push(batch []entry) {
	if len(batch) == 0 {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	n := uint64(len(r.slots))
	for _, e := range batch {
		r.slots[r.next%n] = e
		r.next++
	}
	wake := r.wake
	r.wake = make(chan struct{})
	r.mu.Unlock()
	close(wake)
}

// close ends every reader's wait; reads still return what is held.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.wake)
	}
}

// oldest is the cursor of the oldest record held.
func (r *ring) oldest() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.oldestLocked()
}

func (r *ring) oldestLocked() uint64 {
	if n := uint64(len(r.slots)); r.next > n {
		return r.next - n
	}
	return 0
}

// read appends to dst up to max records from cursor on and returns them, the
// cursor after them, how many records before them were overwritten since
// cursor, a channel closed when more are written, and whether the ring is
// closed.
func (r *ring) read(cursor uint64, max int, dst []entry) (out []entry, next, dropped uint64, wake <-chan struct{}, closed bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if o := r.oldestLocked(); cursor < o {
		dropped = o - cursor
		cursor = o
	}
	n := uint64(len(r.slots))
	for ; cursor < r.next && len(dst) < max; cursor++ {
		dst = append(dst, r.slots[cursor%n])
	}
	return dst, cursor, dropped, r.wake, r.closed
}
