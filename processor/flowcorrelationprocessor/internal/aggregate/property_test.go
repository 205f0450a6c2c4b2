package aggregate

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// connectionRecords returns the reports of both Nodes about one inter-Node
// connection: `updates` polls each, cumulative counters growing, the last
// one the end of the flow (the same on both sides, as conntrack reports it).
func connectionRecords(i, updates int, rng *rand.Rand) []*flowrecord.Record {
	src := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
	dst := netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})
	var out []*flowrecord.Record
	var srcTotal, dstTotal uint64
	for u := 1; u <= updates; u++ {
		end := at(5 * u)
		state, reason := "ESTABLISHED", flowrecord.EndReasonActiveTimeout
		if u == updates {
			state, reason = "TIME_WAIT", flowrecord.EndReasonEndOfFlow
		}
		mk := func(side flowrecord.Side, total uint64) *flowrecord.Record {
			r := &flowrecord.Record{
				Start: t0, End: end, Protocol: 6,
				Source:      flowrecord.Endpoint{Address: src, Port: uint16(40000 + i%1000), Kind: flowrecord.EndpointPod},
				Destination: flowrecord.Endpoint{Address: dst, Port: 8080, Kind: flowrecord.EndpointPod},
				FlowType:    flowrecord.FlowTypeInterNode, TCPState: state, EndReason: reason,
				Stats:        flowrecord.Counters{PacketTotal: total / 100, OctetTotal: total},
				ReverseStats: flowrecord.Counters{PacketTotal: total / 50, OctetTotal: 2 * total},
			}
			if side == flowrecord.SideSource {
				r.Source.PodName, r.Source.Namespace, r.Source.NodeName = fmt.Sprintf("client-%d", i), "ns", "node-a"
				r.Service.PortName = "ns/svc:http"
				r.Reporter = flowrecord.Reporter{NodeName: "node-a", Side: side}
			} else {
				r.Destination.PodName, r.Destination.Namespace, r.Destination.NodeName = fmt.Sprintf("server-%d", i), "ns", "node-b"
				r.IngressPolicy = flowrecord.Policy{Name: "allow", RuleAction: flowrecord.RuleActionAllow}
				r.Reporter = flowrecord.Reporter{NodeName: "node-b", Side: side}
			}
			return r
		}
		srcTotal += 1000 + uint64(rng.IntN(1000))
		dstTotal += 1000 + uint64(rng.IntN(1000))
		out = append(out, mk(flowrecord.SideSource, srcTotal), mk(flowrecord.SideDestination, dstTotal))
	}
	return out
}

// outcome is what must not depend on arrival order: for each connection,
// whether it paired, and its last exported state.
type outcome struct {
	pairedExports int
	otherStates   int
	last          flowrecord.Record
	lastAgg       flowrecord.Aggregation
}

func run(recs []*flowrecord.Record) map[string]*outcome {
	tbl := New(testSettings())
	res := map[string]*outcome{}
	emit := func(r *flowrecord.Record, why Reason) {
		o := res[r.Key]
		if o == nil {
			o = &outcome{}
			res[r.Key] = o
		}
		if why == ReasonReady && r.Correlation == flowrecord.CorrelationPaired {
			o.pairedExports++
		}
		if r.Correlation != flowrecord.CorrelationPaired {
			o.otherStates++
		}
		o.last, o.lastAgg = *r, *r.Aggregation
	}
	for _, r := range recs {
		c := *r
		tbl.Add(&c, at(1), emit)
	}
	tbl.Flush(at(2), emit)
	return res
}

// Random interleavings and duplications of the records of many connections
// give the same pairs, and the same final per-Node statistics, as the
// ordered sequence.
func TestPropertyOrderAndDuplicatesDoNotMatter(t *testing.T) {
	const conns, updates, rounds = 200, 4, 20
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		var ordered []*flowrecord.Record
		for i := range conns {
			ordered = append(ordered, connectionRecords(i, updates, rng)...)
		}
		// Ordered: by time, then connection.
		byTime := make([]*flowrecord.Record, 0, len(ordered))
		for u := range updates {
			for i := range conns {
				base := i * 2 * updates
				byTime = append(byTime, ordered[base+2*u], ordered[base+2*u+1])
			}
		}
		want := run(byTime)

		shuffled := append([]*flowrecord.Record(nil), byTime...)
		for range len(byTime) / 3 { // duplicate a third of the records
			shuffled = append(shuffled, byTime[rng.IntN(len(byTime))])
		}
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := run(shuffled)

		require.Len(t, want, conns)
		require.Len(t, got, conns, "round %d", round)
		for key, w := range want {
			g := got[key]
			require.NotNil(t, g, "round %d: %s not exported", round, key)
			assert.Equal(t, 1, w.pairedExports)
			assert.Equal(t, 1, g.pairedExports, "round %d: %s must pair exactly once", round, key)
			assert.Zero(t, g.otherStates, "round %d: %s exported unpaired", round, key)
			for _, r := range []*outcome{w, g} {
				// Deltas and throughputs depend on which records arrived between
				// exports; totals, timestamps and identity must not.
				zeroPeriodValues(r)
			}
			assert.Equal(t, w.lastAgg, g.lastAgg, "round %d: %s per-Node statistics", round, key)
			w.last.Aggregation, g.last.Aggregation = nil, nil
			w.last.Observed, g.last.Observed = time.Time{}, time.Time{}
			assert.Equal(t, w.last, g.last, "round %d: %s record", round, key)
		}
	}
}

func zeroPeriodValues(o *outcome) {
	for _, c := range []*flowrecord.Counters{&o.last.Stats, &o.last.ReverseStats, &o.lastAgg.StatsFromSource,
		&o.lastAgg.ReverseStatsFromSource, &o.lastAgg.StatsFromDestination, &o.lastAgg.ReverseStatsFromDestination} {
		c.PacketDelta, c.OctetDelta = 0, 0
	}
	a := &o.lastAgg
	a.Throughput, a.ReverseThroughput, a.ThroughputFromSource, a.ReverseThroughputFromSource = 0, 0, 0, 0
	a.ThroughputFromDestination, a.ReverseThroughputFromDestination = 0, 0
}

// sideExports are one Node's exports of one inter-Node connection, as its
// conntrack receiver makes them: cumulative totals that grow by random
// amounts (sometimes none: an idle export), each export's delta the growth
// since the previous one (the first's its total), end timestamps five
// seconds apart with jitter, the last one at end.
func sideExports(side flowrecord.Side, n int, end time.Time, rng *rand.Rand) []*flowrecord.Record {
	var fwd, rev flowrecord.Counters
	grow := func(c *flowrecord.Counters) {
		c.PacketDelta, c.OctetDelta = 0, 0
		if rng.IntN(4) > 0 {
			c.PacketDelta = uint64(1 + rng.IntN(50))
			c.OctetDelta = c.PacketDelta * uint64(40+rng.IntN(1460))
		}
		c.PacketTotal += c.PacketDelta
		c.OctetTotal += c.OctetDelta
	}
	out := make([]*flowrecord.Record, 0, n)
	for u := 1; u <= n; u++ {
		grow(&fwd)
		grow(&rev)
		r := connectionRecords(0, 1, rng)[0]
		if side == flowrecord.SideDestination {
			r = connectionRecords(0, 1, rng)[1]
		}
		r.End = at(5 * u).Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		r.EndReason, r.TCPState = flowrecord.EndReasonActiveTimeout, "ESTABLISHED"
		if u == n {
			r.End, r.EndReason, r.TCPState = end, flowrecord.EndReasonEndOfFlow, "TIME_WAIT"
		}
		r.Stats, r.ReverseStats = fwd, rev
		out = append(out, r)
	}
	return out
}

// decision D10: whatever the interleaving of the two Nodes' exports of a
// connection, with reordering, duplicates, exports of the gateway in between
// (active timeouts, a pairing timeout before the peer shows up), the deltas
// of every record exported for it add up, exactly, to its final totals: the
// common counters to the common totals, each side's to that Node's totals.
// A connection whose peer never comes is exported unpaired, and adds up too.
// In some rounds the tuple is reused: a second connection (a later start on
// each Node's clock, counters from 0) follows the first, mixed with
// duplicates of the first's exports, and each adds up on its own.
func TestPropertyDeltasAddUpToTotals(t *testing.T) {
	const rounds = 2000
	s := Settings{ActiveTimeout: 3 * time.Second, InactiveTimeout: time.Hour, PairingTimeout: 20 * time.Second}
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 10))
		lonely := round%10 == 0 // the peer never arrives
		reused := round%4 == 1  // a second connection on the same tuple follows
		first := newPropertyConn(rng, 0, lonely)
		arrivals := first.arrivals(rng, nil)
		var second *propertyConn
		if reused {
			second = newPropertyConn(rng, 200*time.Second, false)
			arrivals = append(arrivals, second.arrivals(rng, arrivals)...)
		}

		tbl, x := New(s), &exported{}
		now := at(0)
		for _, r := range arrivals {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			if rng.IntN(3) == 0 {
				tbl.Expire(now, x.emit)
			}
			c := *r
			tbl.Add(&c, now, x.emit)
		}
		tbl.Flush(now.Add(time.Second), x.emit)
		recs, _ := x.take()
		require.NotEmpty(t, recs, "round %d", round)
		if !reused {
			first.check(t, round, recs)
			continue
		}
		var ofFirst, ofSecond []flowrecord.Record
		for _, r := range recs {
			switch r.Start {
			case first.src[0].Start, first.dst[0].Start:
				require.Empty(t, ofSecond, "round %d: an export of the replaced connection after the new one's", round)
				ofFirst = append(ofFirst, r)
			case second.src[0].Start, second.dst[0].Start:
				ofSecond = append(ofSecond, r)
			default:
				t.Fatalf("round %d: an export of no connection: start %v", round, r.Start)
			}
		}
		first.check(t, round, ofFirst)
		second.check(t, round, ofSecond)
	}
}

// propertyConn is one connection of TestPropertyDeltasAddUpToTotals: each
// Node's exports, and whether the destination's ever arrive.
type propertyConn struct {
	src, dst []*flowrecord.Record
	lonely   bool
}

// newPropertyConn makes a connection that starts after (each Node's start a
// second apart: their clocks differ) and ends 100 s later.
func newPropertyConn(rng *rand.Rand, after time.Duration, lonely bool) *propertyConn {
	c := &propertyConn{lonely: lonely}
	end := at(100)
	c.src = sideExports(flowrecord.SideSource, 1+rng.IntN(8), end, rng)
	c.dst = sideExports(flowrecord.SideDestination, 1+rng.IntN(8), end, rng)
	for _, side := range []struct {
		recs []*flowrecord.Record
		skew time.Duration
	}{{c.src, 0}, {c.dst, -time.Second}} {
		for _, r := range side.recs {
			r.Start = r.Start.Add(after + side.skew)
			r.End = r.End.Add(after)
		}
	}
	return c
}

// arrivals are c's exports as the gateway receives them: shuffled, some
// twice, mixed with duplicates of earlier ones (the exports of a connection
// the tuple had before).
func (c *propertyConn) arrivals(rng *rand.Rand, earlier []*flowrecord.Record) []*flowrecord.Record {
	out := append([]*flowrecord.Record(nil), c.src...)
	if !c.lonely {
		out = append(out, c.dst...)
	}
	for range rng.IntN(len(out)) { // duplicates
		out = append(out, out[rng.IntN(len(out))])
	}
	for range rng.IntN(len(earlier) + 1) {
		out = append(out, earlier[rng.IntN(len(earlier))])
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// check requires the deltas of recs, c's exports, to add up to c's final
// totals, and their correlation states to be right (decision D4).
func (c *propertyConn) check(t *testing.T, round int, recs []flowrecord.Record) {
	t.Helper()
	require.NotEmpty(t, recs, "round %d: no export", round)
	last := recs[len(recs)-1]
	var dstFinal *flowrecord.Record
	if !c.lonely {
		dstFinal = c.dst[len(c.dst)-1]
	}
	requireAddsUp(t, fmt.Sprintf("round %d", round), recs, c.src[len(c.src)-1], dstFinal)
	// decision D4: what cannot pair is exported, marked unpaired; a pair is
	// marked paired (a pairing timeout may export a half unpaired before
	// its peer arrives).
	for _, r := range recs {
		if c.lonely {
			require.Equal(t, flowrecord.CorrelationUnpaired, r.Correlation, "round %d: a half without its peer", round)
		} else {
			require.Contains(t, []flowrecord.CorrelationState{flowrecord.CorrelationPaired, flowrecord.CorrelationUnpaired}, r.Correlation, "round %d", round)
		}
	}
	if !c.lonely {
		require.Equal(t, flowrecord.CorrelationPaired, last.Correlation, "round %d", round)
	}
}

// requireAddsUp requires the deltas of a connection's exports, recs, to add
// up to the totals each Node last reported (src, dst; dst nil when the
// destination's Node never reported), and its last export to carry them.
func requireAddsUp(t *testing.T, name string, recs []flowrecord.Record, src, dst *flowrecord.Record) {
	t.Helper()
	require.NotEmpty(t, recs, "%s: no export", name)
	last := recs[len(recs)-1]
	common := func(of func(*flowrecord.Record) flowrecord.Counters) flowrecord.Counters {
		if dst == nil {
			return of(src)
		}
		s, d := of(src), of(dst)
		return flowrecord.Counters{PacketTotal: max(s.PacketTotal, d.PacketTotal), OctetTotal: max(s.OctetTotal, d.OctetTotal)}
	}
	type check struct {
		what  string
		of    func(*flowrecord.Record) flowrecord.Counters
		final flowrecord.Counters
	}
	stats := func(r *flowrecord.Record) flowrecord.Counters { return r.Stats }
	reverse := func(r *flowrecord.Record) flowrecord.Counters { return r.ReverseStats }
	checks := []check{
		{"common", stats, common(stats)},
		{"common reverse", reverse, common(reverse)},
		{"source", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.StatsFromSource }, src.Stats},
		{"source reverse", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.ReverseStatsFromSource }, src.ReverseStats},
	}
	if dst != nil {
		checks = append(checks,
			check{"destination", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.StatsFromDestination }, dst.Stats},
			check{"destination reverse", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.ReverseStatsFromDestination }, dst.ReverseStats})
	}
	for _, c := range checks {
		sum := sumDeltas(recs, c.of)
		got := c.of(&last)
		require.Equal(t, c.final.OctetTotal, got.OctetTotal, "%s: %s final octet total", name, c.what)
		require.Equal(t, c.final.PacketTotal, got.PacketTotal, "%s: %s final packet total", name, c.what)
		require.Equal(t, c.final.OctetTotal, sum.OctetDelta, "%s: %s octet deltas", name, c.what)
		require.Equal(t, c.final.PacketTotal, sum.PacketDelta, "%s: %s packet deltas", name, c.what)
	}
}
