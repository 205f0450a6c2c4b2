package aggregate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// nodeExport is export n (1-based) of an intra-Node connection by its
// Node: cumulative totals of n×(n+1)/2 × 1000 B, the delta since export n−1,
// the end timestamp 5n s.
func nodeExport(n int) *flowrecord.Record {
	r := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, 0)
	total, delta := uint64(n*(n+1)/2*1000), uint64(n*1000)
	r.End = at(5 * n)
	r.Stats = flowrecord.Counters{PacketTotal: total / 100, OctetTotal: total, PacketDelta: delta / 100, OctetDelta: delta}
	r.ReverseStats = flowrecord.Counters{PacketTotal: total / 50, OctetTotal: 2 * total, PacketDelta: delta / 50, OctetDelta: 2 * delta}
	return r
}

// A reordered distinct export counts; an exact duplicate does not: the
// deltas exported for a connection add up to its total whatever the order
// its Node's exports arrive in, and every record that is not newer than its
// side's last is counted as a duplicate or as reordered.
func TestLateDistinctExportsKeepTheirDeltas(t *testing.T) {
	export := -1 // in a sequence: expire (export) what is due
	cases := []struct {
		name                  string
		seq                   []int
		duplicates, reordered int
	}{
		{name: "in order", seq: []int{1, 2, 3}},
		{name: "late after an export", seq: []int{1, 3, export, 2}, reordered: 1},
		{name: "late before an export", seq: []int{1, 3, 2}, reordered: 1},
		{name: "oldest last", seq: []int{2, 3, export, 1}, reordered: 1},
		{name: "oldest second", seq: []int{2, 1, 3}, reordered: 1},
		{name: "duplicates", seq: []int{1, 1, 2, export, 2, 3, 3}, duplicates: 3},
		{name: "a late duplicate", seq: []int{1, 2, 3, export, 2}, reordered: 1},
		{name: "a lost export", seq: []int{1, 3}},
		{name: "reversed", seq: []int{3, 2, export, 1}, reordered: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tbl, x := newTestTable(t)
			var dups, late int
			tbl.OnLate = func(duplicate bool) {
				if duplicate {
					dups++
				} else {
					late++
				}
			}
			now := 0
			for _, n := range c.seq {
				now += 61 // past the active timeout: expiring exports what is new
				if n == export {
					tbl.Expire(at(now), x.emit)
					continue
				}
				tbl.Add(nodeExport(n), at(now), x.emit)
			}
			tbl.Flush(at(now+1), x.emit)
			recs, _ := x.take()
			require.NotEmpty(t, recs)
			want := nodeExport(3)
			last := recs[len(recs)-1]
			assert.Equal(t, totalsOf(want.Stats), totalsOf(last.Stats), "final totals")
			for name, sum := range map[string]flowrecord.Counters{
				"common":              sumDeltas(recs, func(r *flowrecord.Record) flowrecord.Counters { return r.Stats }),
				"common reverse":      sumDeltas(recs, func(r *flowrecord.Record) flowrecord.Counters { return r.ReverseStats }),
				"source":              sumDeltas(recs, func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.StatsFromSource }),
				"source reverse":      sumDeltas(recs, func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.ReverseStatsFromSource }),
				"destination":         sumDeltas(recs, func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.StatsFromDestination }),
				"destination reverse": sumDeltas(recs, func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.ReverseStatsFromDestination }),
			} {
				total := want.Stats
				if name != "common" && name != "source" && name != "destination" {
					total = want.ReverseStats
				}
				assert.Equal(t, total.OctetTotal, sum.OctetDelta, "%s octet deltas", name)
				assert.Equal(t, total.PacketTotal, sum.PacketDelta, "%s packet deltas", name)
			}
			assert.Equal(t, c.duplicates, dups, "duplicates counted")
			assert.Equal(t, c.reordered, late, "reordered counted")
		})
	}
}

// sumDeltas sums one counter's deltas over recs.
func sumDeltas(recs []flowrecord.Record, of func(*flowrecord.Record) flowrecord.Counters) flowrecord.Counters {
	var s flowrecord.Counters
	for i := range recs {
		c := of(&recs[i])
		s.PacketDelta += c.PacketDelta
		s.OctetDelta += c.OctetDelta
	}
	return s
}

// A duplicate is no new data: it does not cause a re-export.
func TestDuplicateCausesNoExport(t *testing.T) {
	tbl, x := newTestTable(t)
	tbl.Add(nodeExport(1), at(5), x.emit)
	tbl.Add(nodeExport(2), at(10), x.emit)
	tbl.Expire(at(70), x.emit)
	recs, _ := x.take()
	require.Len(t, recs, 2)
	tbl.Add(nodeExport(2), at(71), x.emit)
	tbl.Add(nodeExport(1), at(72), x.emit) // late, and already inside what was reported
	tbl.Expire(at(200), x.emit)
	recs, _ = x.take()
	assert.Empty(t, recs, "nothing new to report")
	assert.Equal(t, 0, tbl.Len())
}
