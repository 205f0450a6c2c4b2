package aggregate

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// decision D10 across processes: a gateway restart (the old process flushes
// what it holds, a new one with an empty table takes the Nodes' next
// exports), a rolling update of replicas that moves a connection's key from
// one replica to another (each Node's collector switches at its own moment,
// so for a while the halves go to different replicas), or an entry forgotten
// after its inactive timeout and started again: the deltas of every record
// any process exported for the connection still add up to its totals,
// common and per side. No process knows what another exported; what each
// needs travels in the records (each Node's export covers the range
// total−delta..total of its counters).
func TestPropertyDeltasAddUpAcrossProcesses(t *testing.T) {
	const rounds = 2000
	s := Settings{ActiveTimeout: 3 * time.Second, InactiveTimeout: time.Hour, PairingTimeout: 20 * time.Second}
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 41))
		c := newPropertyConn(rng, 0, false)
		c.src = sideExports(flowrecord.SideSource, 2+rng.IntN(8), at(100), rng)
		c.dst = sideExports(flowrecord.SideDestination, 2+rng.IntN(8), at(100), rng)
		// Each Node's exports up to its own switch go to the first process.
		cutSrc, cutDst := 1+rng.IntN(len(c.src)-1), 1+rng.IntN(len(c.dst)-1)
		if round%3 == 0 { // a restart: both Nodes switch at once, in time order
			cutDst = switchAt(c.dst, c.src[cutSrc].End)
		}
		first := byEnd(append(append([]*flowrecord.Record(nil), c.src[:cutSrc]...), c.dst[:cutDst]...))
		second := byEnd(append(append([]*flowrecord.Record(nil), c.src[cutSrc:]...), c.dst[cutDst:]...))
		if round%2 == 1 { // reordering inside each process
			rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
			rng.Shuffle(len(second), func(i, j int) { second[i], second[j] = second[j], second[i] })
		}

		var recs []flowrecord.Record
		now := at(0)
		for _, part := range [][]*flowrecord.Record{first, second} {
			tbl, x := New(s), &exported{}
			for _, r := range part {
				now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
				if rng.IntN(3) == 0 {
					tbl.Expire(now, x.emit)
				}
				cp := *r
				tbl.Add(&cp, now, x.emit)
			}
			tbl.Flush(now.Add(time.Second), x.emit) // SIGTERM: the shutdown flush
			got, _ := x.take()
			recs = append(recs, got...)
		}
		requireAddsUp(t, fmt.Sprintf("round %d (source switched after %d of %d, destination after %d of %d)",
			round, cutSrc, len(c.src), cutDst, len(c.dst)), recs, c.src[len(c.src)-1], c.dst[len(c.dst)-1])
	}
}

// The case a restart showed on a real download: the destination Node's
// last export to the old gateway lagged the source's, so the new gateway's
// first destination record reaches below what the old one exported from the
// source. Its deltas must start where the old gateway's common totals ended.
func TestRestartDoesNotRecountTheLaggingSide(t *testing.T) {
	s := Settings{ActiveTimeout: 3 * time.Second, InactiveTimeout: 6 * time.Second, PairingTimeout: 15 * time.Second}
	rec := func(side flowrecord.Side, end int, low, total uint64) *flowrecord.Record {
		i := 1
		if side == flowrecord.SideSource {
			i = 0
		}
		r := connectionRecords(0, 1, rand.New(rand.NewPCG(1, 1)))[i]
		r.End, r.EndReason, r.TCPState = at(end), flowrecord.EndReasonActiveTimeout, "ESTABLISHED"
		r.Stats = flowrecord.Counters{PacketTotal: total / 1000, PacketDelta: total/1000 - low/1000, OctetTotal: total, OctetDelta: total - low}
		r.ReverseStats = flowrecord.Counters{}
		return r
	}
	old, x := New(s), &exported{}
	old.Add(rec(flowrecord.SideSource, 2, 0, 60000), at(2), x.emit)
	old.Add(rec(flowrecord.SideDestination, 2, 0, 50000), at(2), x.emit)
	old.Add(rec(flowrecord.SideDestination, 3, 50000, 116000), at(3), x.emit)
	old.Add(rec(flowrecord.SideSource, 4, 60000, 161000), at(4), x.emit)
	old.Flush(at(4), x.emit)
	before, _ := x.take()

	next := New(s)
	next.Add(rec(flowrecord.SideDestination, 5, 116000, 200000), at(5), x.emit)
	next.Add(rec(flowrecord.SideSource, 6, 161000, 288000), at(6), x.emit)
	next.Flush(at(7), x.emit)
	after, _ := x.take()
	require.NotEmpty(t, after)
	require.Equal(t, uint64(161000), sumDeltas(before, func(r *flowrecord.Record) flowrecord.Counters { return r.Stats }).OctetDelta)
	require.Equal(t, uint64(288000-161000), sumDeltas(after, func(r *flowrecord.Record) flowrecord.Counters { return r.Stats }).OctetDelta,
		"the new gateway re-counted what the old one exported")
	require.Equal(t, uint64(288000), after[len(after)-1].Stats.OctetTotal)
}

// switchAt is the index of the first of recs that ends after t.
func switchAt(recs []*flowrecord.Record, t time.Time) int {
	for i, r := range recs {
		if r.End.After(t) {
			return max(1, i)
		}
	}
	return len(recs) - 1
}

func byEnd(recs []*flowrecord.Record) []*flowrecord.Record {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].End.Before(recs[j].End) })
	return recs
}

// A connection's chain ends once: the two Nodes' end-of-flow records come up
// to a poll and an export period apart, and a periodic export between them
// is not the end (the later Node may still count). When the other Node's end
// never comes, the last export (inactive timeout) carries it, even with
// nothing new to report.
func TestOneEndOfFlowPerConnection(t *testing.T) {
	s := Settings{ActiveTimeout: 3 * time.Second, InactiveTimeout: 6 * time.Second, PairingTimeout: 15 * time.Second}
	ends := func(recs []flowrecord.Record) (n int, lastIsEnd bool) {
		for _, r := range recs {
			if r.EndReason == flowrecord.EndReasonEndOfFlow {
				n++
			}
		}
		return n, len(recs) > 0 && recs[len(recs)-1].EndReason == flowrecord.EndReasonEndOfFlow
	}
	for _, otherEnds := range []bool{true, false} {
		tbl, x := New(s), &exported{}
		src, dst := srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0), dstHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
		tbl.Add(src, at(1), x.emit)
		tbl.Add(dst, at(1), x.emit)
		srcEnd := srcHalf(v4, flowrecord.FlowTypeInterNode, true, 0)
		tbl.Add(srcEnd, at(10), x.emit)
		tbl.Expire(at(12), x.emit) // the active timeout, before the other end
		if otherEnds {
			tbl.Add(dstHalf(v4, flowrecord.FlowTypeInterNode, true, 0), at(13), x.emit)
		}
		tbl.Expire(at(16), x.emit)
		tbl.Expire(at(30), x.emit)
		recs, _ := x.take()
		n, last := ends(recs)
		require.Equal(t, 1, n, "other side ends: %v; exports: %v", otherEnds, reasonsOf(recs))
		require.True(t, last, "the end is the chain's last export: %v", reasonsOf(recs))
	}
}

func reasonsOf(recs []flowrecord.Record) []flowrecord.EndReason {
	var out []flowrecord.EndReason
	for _, r := range recs {
		out = append(out, r.EndReason)
	}
	return out
}
