package aggregate

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The deadline queue against a sorted list: random pushes, removals at any
// place, dues moved either way, then everything popped in due order, with
// every entry's index its place throughout.
func TestDeadlineQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		var q deadlineQueue
		held := map[*entry]bool{}
		check := func() {
			t.Helper()
			for i, e := range q {
				require.Equal(t, i, e.index, "round %d: index of the entry at %d", round, i)
				if i > 0 {
					require.LessOrEqual(t, q[(i-1)/2].due, e.due, "round %d: heap order at %d", round, i)
				}
			}
			require.Len(t, q, len(held))
		}
		for range 200 {
			switch op := rng.IntN(4); {
			case op <= 1 || len(q) == 0:
				e := &entry{}
				e.due = rng.Int64N(1000)
				q.push(e)
				held[e] = true
			case op == 2:
				e := q.remove(rng.IntN(len(q)))
				require.Equal(t, -1, e.index)
				require.True(t, held[e])
				delete(held, e)
			default:
				i := rng.IntN(len(q))
				q[i].due = rng.Int64N(1000)
				q.fix(i)
			}
			check()
		}
		var want []int64
		for e := range held {
			want = append(want, e.due)
		}
		slices.Sort(want)
		var got []int64
		for len(q) > 0 {
			e := q.pop()
			delete(held, e)
			got = append(got, e.due)
			check()
		}
		require.Equal(t, want, got, "round %d: popped in due order", round)
	}
}
