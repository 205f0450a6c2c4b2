package conntrackreceiver

import (
	"hash/maphash"
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
}

type shedID struct {
	key   store.Key
	id    uint32
	zone  uint16
	start int64
}

func newShedSet(limit int) *shedSet { return &shedSet{seed: maphash.MakeSeed(), limit: limit} }

// add notes c as shed at this poll and reports whether it was not shed at
// the previous one (it is to be counted).
func (s *shedSet) add(c *store.Conn) bool {
	h := maphash.Comparable(s.seed, shedID{key: c.Key, id: c.ID, zone: c.Zone, start: c.Start})
	if len(s.cur) < s.limit {
		s.cur = append(s.cur, h)
	}
	_, found := slices.BinarySearch(s.prev, h)
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
}
