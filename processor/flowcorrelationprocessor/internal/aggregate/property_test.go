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

// DESIGN D10: whatever the interleaving of the two Nodes' exports of a
// connection, with reordering, duplicates, exports of the gateway in between
// (active timeouts, a pairing timeout before the peer shows up), the deltas
// of every record exported for it add up, exactly, to its final totals: the
// common counters to the common totals, each side's to that Node's totals.
// A connection whose peer never comes is exported unpaired, and adds up too.
func TestPropertyDeltasAddUpToTotals(t *testing.T) {
	const rounds = 2000
	s := Settings{ActiveTimeout: 3 * time.Second, InactiveTimeout: time.Hour, PairingTimeout: 20 * time.Second}
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 10))
		end := at(100)
		src := sideExports(flowrecord.SideSource, 1+rng.IntN(8), end, rng)
		dst := sideExports(flowrecord.SideDestination, 1+rng.IntN(8), end, rng)
		lonely := round%10 == 0 // the peer never arrives
		arrivals := append([]*flowrecord.Record(nil), src...)
		if !lonely {
			arrivals = append(arrivals, dst...)
		}
		for range rng.IntN(len(arrivals)) { // duplicates
			arrivals = append(arrivals, arrivals[rng.IntN(len(arrivals))])
		}
		rng.Shuffle(len(arrivals), func(i, j int) { arrivals[i], arrivals[j] = arrivals[j], arrivals[i] })

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

		last := recs[len(recs)-1]
		srcFinal, dstFinal := src[len(src)-1], dst[len(dst)-1]
		common := func(of func(*flowrecord.Record) flowrecord.Counters) flowrecord.Counters {
			if lonely {
				return of(srcFinal)
			}
			s, d := of(srcFinal), of(dstFinal)
			return flowrecord.Counters{PacketTotal: max(s.PacketTotal, d.PacketTotal), OctetTotal: max(s.OctetTotal, d.OctetTotal)}
		}
		checks := []struct {
			name        string
			of          func(*flowrecord.Record) flowrecord.Counters
			final       flowrecord.Counters
			lastTotals  flowrecord.Counters
			onlyIfPeers bool
		}{
			{"common", func(r *flowrecord.Record) flowrecord.Counters { return r.Stats },
				common(func(r *flowrecord.Record) flowrecord.Counters { return r.Stats }), last.Stats, false},
			{"common reverse", func(r *flowrecord.Record) flowrecord.Counters { return r.ReverseStats },
				common(func(r *flowrecord.Record) flowrecord.Counters { return r.ReverseStats }), last.ReverseStats, false},
			{"source", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.StatsFromSource },
				srcFinal.Stats, last.Aggregation.StatsFromSource, false},
			{"source reverse", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.ReverseStatsFromSource },
				srcFinal.ReverseStats, last.Aggregation.ReverseStatsFromSource, false},
			{"destination", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.StatsFromDestination },
				dstFinal.Stats, last.Aggregation.StatsFromDestination, true},
			{"destination reverse", func(r *flowrecord.Record) flowrecord.Counters { return r.Aggregation.ReverseStatsFromDestination },
				dstFinal.ReverseStats, last.Aggregation.ReverseStatsFromDestination, true},
		}
		for _, c := range checks {
			if c.onlyIfPeers && lonely {
				continue
			}
			sum := sumDeltas(recs, c.of)
			require.Equal(t, c.final.OctetTotal, c.lastTotals.OctetTotal, "round %d: %s final octet total", round, c.name)
			require.Equal(t, c.final.PacketTotal, c.lastTotals.PacketTotal, "round %d: %s final packet total", round, c.name)
			require.Equal(t, c.final.OctetTotal, sum.OctetDelta, "round %d: %s octet deltas", round, c.name)
			require.Equal(t, c.final.PacketTotal, sum.PacketDelta, "round %d: %s packet deltas", round, c.name)
		}
		// DESIGN D4: what cannot pair is exported, marked unpaired; a pair is
		// marked paired (a pairing timeout may export a half unpaired before
		// its peer arrives).
		for _, r := range recs {
			if lonely {
				require.Equal(t, flowrecord.CorrelationUnpaired, r.Correlation, "round %d: a half without its peer", round)
			} else {
				require.Contains(t, []flowrecord.CorrelationState{flowrecord.CorrelationPaired, flowrecord.CorrelationUnpaired}, r.Correlation, "round %d", round)
			}
		}
		if !lonely {
			require.Equal(t, flowrecord.CorrelationPaired, last.Correlation, "round %d", round)
		}
	}
}
