package aggregate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// conn describes one connection on the test tuple: when each side's Node
// says it started (each on its own clock) and its exports.
type conn struct {
	srcStart, dstStart time.Time
}

// export is one Node's export of c: cumulative totals (the reverse
// direction twice the forward one), the delta since that Node's previous
// export, ending at end; last marks the end of the flow.
func (c conn) export(side flowrecord.Side, end int, total, delta uint64, last bool) *flowrecord.Record {
	var r *flowrecord.Record
	if side == flowrecord.SideSource {
		r = srcHalf(v4, flowrecord.FlowTypeInterNode, last, flowrecord.RuleActionNone)
		r.Start = c.srcStart
	} else {
		r = dstHalf(v4, flowrecord.FlowTypeInterNode, last, flowrecord.RuleActionNone)
		r.Start = c.dstStart
	}
	r.End = at(end)
	r.Stats = flowrecord.Counters{PacketTotal: total / 10, OctetTotal: total, PacketDelta: delta / 10, OctetDelta: delta}
	r.ReverseStats = flowrecord.Counters{PacketTotal: 2 * total / 10, OctetTotal: 2 * total, PacketDelta: 2 * delta / 10, OctetDelta: 2 * delta}
	return r
}

var (
	// The old connection; the destination Node's clock is a second behind.
	connA = conn{srcStart: at(0), dstStart: at(-1)}
	// The new one on the same tuple, after the old one (on each Node's clock).
	connB = conn{srcStart: at(30), dstStart: at(29)}
)

// of tells which of the connections' chains r is in, by its start (that of
// its connection's first record, from either side).
func of(r flowrecord.Record, conns ...conn) int {
	for i, c := range conns {
		if r.Start == c.srcStart || r.Start == c.dstStart {
			return i
		}
	}
	return -1
}

// chainsOf splits exports into the chains of conns.
func chainsOf(recs []flowrecord.Record, conns ...conn) [][]flowrecord.Record {
	ch := make([][]flowrecord.Record, len(conns))
	for _, r := range recs {
		if i := of(r, conns...); i >= 0 {
			ch[i] = append(ch[i], r)
		}
	}
	return ch
}

type reuseCounts struct{ replaced, stale int }

func newReuseTable(t *testing.T) (*Table, *exported, *reuseCounts) {
	tbl, x := newTestTable(t)
	n := &reuseCounts{}
	tbl.OnReplaced = func() { n.replaced++ }
	tbl.OnStale = func() { n.stale++ }
	return tbl, x, n
}

// A tuple reused by a new conntrack entry is a new connection at the
// gateway too: the old one's chain ends as it was, the new one has its own
// start, pairs with its own peer, and its deltas add up to its own totals.
func TestTupleReuseStartsANewConnection(t *testing.T) {
	const S, D = flowrecord.SideSource, flowrecord.SideDestination
	aSrc1, aDst1 := connA.export(S, 5, 1000, 1000, false), connA.export(D, 5, 1100, 1100, false)
	aSrcEnd, aDstEnd := connA.export(S, 10, 2000, 1000, true), connA.export(D, 10, 2050, 950, true)
	aSrc2 := connA.export(S, 8, 1500, 500, false)
	// The new connection's counters start from 0 again, below the old totals.
	bSrc1, bDst1 := connB.export(S, 35, 300, 300, false), connB.export(D, 35, 310, 310, false)
	bSrcEnd, bDstEnd := connB.export(S, 40, 700, 400, true), connB.export(D, 40, 720, 410, true)

	cases := []struct {
		name     string
		arrivals []*flowrecord.Record
		aFinal   [2]*flowrecord.Record // the old connection's last totals per side
		replaced int
		stale    int
	}{
		{"after end of flow on both sides",
			[]*flowrecord.Record{aSrc1, aDst1, aSrcEnd, aDstEnd, bSrc1, bDst1, bSrcEnd, bDstEnd},
			[2]*flowrecord.Record{aSrcEnd, aDstEnd}, 1, 0},
		{"after end of flow on one side (the other's lost)",
			[]*flowrecord.Record{aSrc1, aDst1, aSrcEnd, bDst1, bSrc1, bSrcEnd, bDstEnd},
			[2]*flowrecord.Record{aSrcEnd, aDst1}, 1, 0},
		{"while the old one is still held, with unexported counts",
			[]*flowrecord.Record{aSrc1, aDst1, aSrc2, bSrc1, bDst1, bDstEnd, bSrcEnd},
			[2]*flowrecord.Record{aSrc2, aDst1}, 1, 0},
		{"old exports after the new one: a duplicate, a late end of flow, a reordered one",
			[]*flowrecord.Record{aSrc1, aDst1, aSrcEnd, aDstEnd, bSrc1, aSrcEnd, aDstEnd, aSrc2, bDst1, aDst1, bSrcEnd, bDstEnd},
			[2]*flowrecord.Record{aSrcEnd, aDstEnd}, 1, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tbl, x, n := newReuseTable(t)
			for i, r := range c.arrivals {
				cp := *r
				tbl.Add(&cp, at(100+i), x.emit)
			}
			tbl.Flush(at(200), x.emit)
			recs, why := x.take()
			ch := chainsOf(recs, connA, connB)
			require.Len(t, recs, len(ch[0])+len(ch[1]), "every export is of one of the two connections")
			a, b := ch[0], ch[1]
			require.NotEmpty(t, a, "the old connection has its chain")
			requireAddsUp(t, "old connection", a, c.aFinal[0], c.aFinal[1])
			requireAddsUp(t, "new connection", b, bSrcEnd, bDstEnd)
			assert.Equal(t, flowrecord.CorrelationPaired, b[0].Correlation, "the new connection's halves pair")
			assert.Equal(t, flowrecord.CorrelationPaired, b[len(b)-1].Correlation)
			require.NotEmpty(t, b, "the new connection has its own chain")
			assert.Equal(t, flowrecord.EndReasonEndOfFlow, b[len(b)-1].EndReason)
			assert.Equal(t, c.replaced, n.replaced, "replaced connections")
			assert.Equal(t, c.stale, n.stale, "records of the replaced connection dropped")
			// The old chain ends before the new one begins.
			for i, r := range recs {
				if of(r, connA, connB) == 1 {
					for _, later := range recs[i:] {
						assert.Equal(t, 1, of(later, connA, connB), "no export of the old connection after the new one's")
					}
					break
				}
			}
			if c.aFinal[0] == aSrc2 {
				assert.Contains(t, why, ReasonReplaced, "the old connection's unexported counts go out when it is replaced")
			}
		})
	}
}

// A connection that needs no pairing (one Node sees both ends) is replaced
// the same way, and a replaced half that never paired goes out unpaired.
func TestTupleReuseSingleNodeAndPendingHalf(t *testing.T) {
	t.Run("intra-node", func(t *testing.T) {
		tbl, x, n := newReuseTable(t)
		old := srcHalf(v4, flowrecord.FlowTypeIntraNode, true, flowrecord.RuleActionNone)
		next := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, flowrecord.RuleActionNone)
		next.Start, next.End = at(30), at(31)
		next.Stats = flowrecord.Counters{PacketTotal: 3, OctetTotal: 300, PacketDelta: 3, OctetDelta: 300}
		next.ReverseStats = next.Stats
		tbl.Add(old, at(10), x.emit)
		tbl.Add(next, at(31), x.emit)
		recs, _ := x.take()
		require.Len(t, recs, 2)
		assert.Equal(t, at(30), recs[1].Start)
		assert.Equal(t, next.Stats, recs[1].Stats, "the new connection's deltas are its own, not clamped against the old totals")
		assert.Equal(t, next.Stats, recs[1].Aggregation.StatsFromSource)
		assert.Equal(t, 1, n.replaced)
	})
	t.Run("pending half", func(t *testing.T) {
		tbl, x, n := newReuseTable(t)
		old := connA.export(flowrecord.SideSource, 5, 1000, 1000, false)
		next := connB.export(flowrecord.SideSource, 35, 300, 300, false)
		tbl.Add(old, at(5), x.emit)
		tbl.Add(next, at(35), x.emit)
		recs, why := x.take()
		require.Len(t, recs, 1, "the replaced half goes out unpaired at once")
		assert.Equal(t, []Reason{ReasonReplaced}, why)
		assert.Equal(t, flowrecord.CorrelationUnpaired, recs[0].Correlation)
		assert.Equal(t, uint64(1000), recs[0].Stats.OctetDelta)
		assert.Equal(t, 1, tbl.Pending(), "the new half waits for its own peer")
		assert.Equal(t, 1, tbl.Len())
		assert.Equal(t, 1, n.replaced)
	})
}
