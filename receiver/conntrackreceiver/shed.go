package conntrackreceiver

import (
	"hash/maphash"
	"math/bits"
	"slices"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// shedMemory bounds how many shed connections are remembered between two
// polls (8 bytes each, in two slices: 16 MiB at most). Past it, the
// connections not remembered are counted again at the next poll.
const shedMemory = 1 << 20

// shedSet counts each connection shed under max_connections once, not at
// every poll that finds it in the table again: it remembers a 64-bit hash of
// the tuple and conntrack identity of every connection the previous poll
// shed. A connection shed, gone, and back with a new conntrack entry is a
// new connection, counted again; so is one a dump missed once (a dump is not
// a snapshot, see the store).
type shedSet struct {
	seed      maphash.Seed
	prev, cur []uint64 // prev sorted
	limit     int
	// dir indexes prev by the hashes' top bits: the hashes starting with i
	// are prev[dir[i]:dir[i+1]], about shedBucket of them, so a lookup reads
	// one directory entry and one or two cache lines of prev instead of
	// binary-searching a million hashes (20 cache misses).
	dir   []uint32
	shift uint
}

// shedBucket is the mean number of hashes per directory entry.
const shedBucket = 8

type shedID struct {
	key   store.Key
	id    uint32
	zone  uint16
	start int64
}

func newShedSet(limit int) *shedSet {
	s := &shedSet{seed: maphash.MakeSeed(), limit: limit}
	s.index()
	return s
}

// add notes c as shed at this poll and reports whether it was not shed at
// the previous one (it is to be counted).
func (s *shedSet) add(c *store.Conn) bool {
	h := maphash.Comparable(s.seed, shedID{key: c.Key, id: c.ID, zone: c.Zone, start: c.Start})
	if len(s.cur) < s.limit {
		s.cur = append(s.cur, h)
	}
	i := h >> s.shift
	_, found := slices.BinarySearch(s.prev[s.dir[i]:s.dir[i+1]], h)
	return !found
}

// endPoll makes this poll's set the one the next poll compares with. After
// an abandoned poll (complete false), what the previous poll shed is kept
// too: the connections the abandoned dump did not reach are still counted.
func (s *shedSet) endPoll(complete bool) {
	if !complete {
		s.cur = append(s.cur, s.prev[:min(len(s.prev), max(0, s.limit-len(s.cur)))]...)
	}
	slices.Sort(s.cur)
	s.cur = slices.Compact(s.cur)
	s.prev, s.cur = s.cur, s.prev[:0]
	s.index()
}

// index rebuilds dir over prev.
func (s *shedSet) index() {
	b := bits.Len(uint(len(s.prev) / shedBucket)) // 2^b entries
	s.shift = 64 - uint(b)
	n := 1<<b + 1
	if cap(s.dir) < n {
		s.dir = make([]uint32, n)
	}
	s.dir = s.dir[:n]
	j := 0
	for i := range n - 1 {
		for j < len(s.prev) && s.prev[j]>>s.shift < uint64(i) {
			j++
		}
		s.dir[i] = uint32(j)
	}
	s.dir[n-1] = uint32(len(s.prev))
}
