package aggregate

import (
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// side points at one Node's statistics inside an Aggregation.
type side struct {
	end                   *time.Time
	stats, reverse        *flowrecord.Counters
	throughput, reverseTP *uint64
}

func sourceSide(a *flowrecord.Aggregation) side {
	return side{&a.EndFromSource, &a.StatsFromSource, &a.ReverseStatsFromSource,
		&a.ThroughputFromSource, &a.ReverseThroughputFromSource}
}

func destinationSide(a *flowrecord.Aggregation) side {
	return side{&a.EndFromDestination, &a.StatsFromDestination, &a.ReverseStatsFromDestination,
		&a.ThroughputFromDestination, &a.ReverseThroughputFromDestination}
}

// sidesOf says whose statistics a record updates: both sides for a
// connection that needs no pairing (one Node sees it all), else the
// reporter's own side, the destination's when the half is unknown (Antrea).
func sidesOf(required bool, h half) (src, dst bool) {
	switch {
	case !required:
		return true, true
	case h == halfSource:
		return true, false
	default:
		return false, true
	}
}

// initStats fills e's statistics from the first record of its connection:
// totals as reported, deltas what the record's counter ranges span (its own
// deltas, see ledger.go), throughput over the record's whole life.
func initStats(e *entry, r *flowrecord.Record, h half) {
	a := &e.agg
	life := lifetime(r)
	a.Throughput = bitsPerSecond(r.Stats.OctetTotal, life)
	a.ReverseThroughput = bitsPerSecond(r.ReverseStats.OctetTotal, life)
	e.commonFrom = lowsOf(r)
	e.rec.Stats, e.rec.ReverseStats = totalsOf(r.Stats), totalsOf(r.ReverseStats)
	addDeltas(&e.rec.Stats, &e.rec.ReverseStats, spanOf(&e.rec.Stats, &e.rec.ReverseStats, e.commonFrom))
	src, dst := sidesOf(e.required, h)
	e.noteEnd(r, h)
	if src {
		fillSide(sourceSide(a), &e.sourceLow, r, a)
	}
	if dst {
		fillSide(destinationSide(a), &e.destinationLow, r, a)
	}
}

// fillSide starts side s from r, its first record.
func fillSide(s side, low *lows, r *flowrecord.Record, a *flowrecord.Aggregation) {
	*s.end = r.End
	*low = lowsOf(r)
	*s.stats, *s.reverse = totalsOf(r.Stats), totalsOf(r.ReverseStats)
	addDeltas(s.stats, s.reverse, spanOf(s.stats, s.reverse, *low))
	*s.throughput, *s.reverseTP = a.Throughput, a.ReverseThroughput
}

// arrival says what a subsequent record brought.
type arrival uint8

const (
	arrivalNewer     arrival = iota // later than its side's last record
	arrivalReordered                // older than its side's last record, a distinct export
	arrivalDuplicate                // the same end and totals as its side's last record
)

// addStats folds a subsequent record into e. Totals and throughputs follow
// Antrea: per-side totals are the side's latest report, the common totals
// follow the side that reported last (never going down), throughputs are
// bits/s over the gap between that side's previous and current end
// timestamps. Deltas do not: they are how much the counter spans grew (see
// ledger.go), so they add up to the totals whatever the order of arrival.
// It reports whether r brought anything new to export (a newer record does;
// a reordered one only when it reaches below what its side covered; a
// duplicate never does) and what kind of arrival it was. Antrea would move a
// side's end timestamp back on an older record; we never do, so that
// duplicates and reordering cannot distort the next throughput.
func addStats(e *entry, r *flowrecord.Record, h half) (fresh bool, what arrival) {
	latest := !r.End.Before(e.rec.End)
	src, dst := sidesOf(e.required, h)
	what = arrivalDuplicate
	var srcMove, dstMove lowMove
	if src {
		f, w, m := updateSide(e, sourceSide(&e.agg), &e.sourceLow, r, latest)
		fresh, what, srcMove = fresh || f, min(what, w), m
	}
	if dst {
		f, w, m := updateSide(e, destinationSide(&e.agg), &e.destinationLow, r, latest)
		fresh, what, dstMove = fresh || f, min(what, w), m
	}
	if !fresh {
		return false, what
	}
	e.noteEnd(r, h)
	if srcMove.moved() || dstMove.moved() {
		e.settleCommonFrom()
	}
	if latest && what == arrivalNewer {
		e.rec.End = r.End
		e.rec.TCPState = r.TCPState
	}
	if e.rec.EndReason != flowrecord.EndReasonEndOfFlow && (what == arrivalNewer || r.EndReason == flowrecord.EndReasonEndOfFlow) {
		e.rec.EndReason = r.EndReason
	}
	return true, what
}

// lowMove is how a side's span start moved on a record: its first record
// (the side was not seen before), or lowered by drop.
type lowMove struct {
	first bool
	drop  lows
}

func (m lowMove) moved() bool { return m.first || !m.drop.zero() }

// sidesFrom is where the common counters' span starts by the records
// alone: the higher of the sides' lowest starts, over the sides reported so
// far (see ledger.go for why the higher).
func (e *entry) sidesFrom() lows {
	switch src, dst := !e.agg.EndFromSource.IsZero(), !e.agg.EndFromDestination.IsZero(); {
	case src && dst:
		return maxLows(e.sourceLow, e.destinationLow)
	case src:
		return e.sourceLow
	default:
		return e.destinationLow
	}
}

// settleCommonFrom moves the common span's start to sidesFrom after a side
// moved its own. Until e's first export nothing of the common span went out,
// so it starts exactly there and the unexported common deltas are the whole
// span; after it, the start only moves down (a reordered older record
// reaching below what was exported), and how far is added to the deltas: a
// side that shows up late, starting higher, cannot take back what went out.
func (e *entry) settleCommonFrom() {
	to := e.sidesFrom()
	if !e.exported {
		e.commonFrom = to
		e.rec.Stats.PacketDelta, e.rec.Stats.OctetDelta = 0, 0
		e.rec.ReverseStats.PacketDelta, e.rec.ReverseStats.OctetDelta = 0, 0
		addDeltas(&e.rec.Stats, &e.rec.ReverseStats, spanOf(&e.rec.Stats, &e.rec.ReverseStats, to))
		return
	}
	addDeltas(&e.rec.Stats, &e.rec.ReverseStats, e.commonFrom.minus(to))
	e.commonFrom = minLows(e.commonFrom, to)
}

// updateSide folds r into side s, whose span starts at low.
func updateSide(e *entry, s side, low *lows, r *flowrecord.Record, latest bool) (fresh bool, what arrival, move lowMove) {
	prev := *s.end
	if prev.IsZero() { // the side's first record: the other half's, pairing
		fillSide(s, low, r, &e.agg)
		e.peerStart = unixNano(r.Start)
		*s.throughput = bitsPerSecond(r.Stats.OctetTotal, lifetime(r))
		*s.reverseTP = bitsPerSecond(r.ReverseStats.OctetTotal, lifetime(r))
		followSide(e, s, latest)
		return true, arrivalNewer, lowMove{first: true}
	}
	move.drop = low.lower(lowsOf(r))
	if !move.drop.zero() {
		addDeltas(s.stats, s.reverse, move.drop)
	}
	if order := r.End.Compare(prev); order <= 0 {
		what = arrivalReordered
		if order == 0 && sameTotals(&r.Stats, s.stats) && sameTotals(&r.ReverseStats, s.reverse) {
			what = arrivalDuplicate
		}
		return move.moved(), what, move
	}
	*s.end = r.End
	gap := r.End.Sub(prev)
	*s.throughput = bitsPerSecond(minus(r.Stats.OctetTotal, s.stats.OctetTotal), gap)
	*s.reverseTP = bitsPerSecond(minus(r.ReverseStats.OctetTotal, s.reverse.OctetTotal), gap)
	growTotals(s.stats, &r.Stats)
	growTotals(s.reverse, &r.ReverseStats)
	followSide(e, s, latest)
	return true, arrivalNewer, move
}

// growTotals takes the reporter's latest totals and adds how much they
// rose to the deltas (the top of the span).
func growTotals(side, in *flowrecord.Counters) {
	side.PacketDelta += minus(in.PacketTotal, side.PacketTotal)
	side.OctetDelta += minus(in.OctetTotal, side.OctetTotal)
	side.PacketTotal, side.OctetTotal = in.PacketTotal, in.OctetTotal
}

// followSide updates the common totals from side s, which sent a newer
// record, and the common throughputs when that record is the latest of
// both sides. The common totals are the higher of the sides' (so they never
// go down, and a process that never saw the other side's records still
// knows where its common span ends); how much they rise is added to the
// common deltas (the top of the common span).
func followSide(e *entry, s side, latest bool) {
	followTotals(&e.rec.Stats, s.stats)
	followTotals(&e.rec.ReverseStats, s.reverse)
	if latest {
		e.agg.Throughput, e.agg.ReverseThroughput = *s.throughput, *s.reverseTP
	}
}

func followTotals(common, side *flowrecord.Counters) {
	common.PacketDelta += minus(side.PacketTotal, common.PacketTotal)
	common.OctetDelta += minus(side.OctetTotal, common.OctetTotal)
	common.PacketTotal = max(common.PacketTotal, side.PacketTotal)
	common.OctetTotal = max(common.OctetTotal, side.OctetTotal)
}

func totalsOf(c flowrecord.Counters) flowrecord.Counters {
	return flowrecord.Counters{PacketTotal: c.PacketTotal, OctetTotal: c.OctetTotal}
}

func sameTotals(a, b *flowrecord.Counters) bool {
	return a.PacketTotal == b.PacketTotal && a.OctetTotal == b.OctetTotal
}

// resetAfterExport clears what is reported "since the last export": all
// deltas and all throughputs; totals and spans stay.
func resetAfterExport(e *entry) {
	a := &e.agg
	for _, c := range []*flowrecord.Counters{&e.rec.Stats, &e.rec.ReverseStats,
		&a.StatsFromSource, &a.ReverseStatsFromSource, &a.StatsFromDestination, &a.ReverseStatsFromDestination} {
		c.PacketDelta, c.OctetDelta = 0, 0
	}
	a.Throughput, a.ReverseThroughput = 0, 0
	a.ThroughputFromSource, a.ReverseThroughputFromSource = 0, 0
	a.ThroughputFromDestination, a.ReverseThroughputFromDestination = 0, 0
}

func lifetime(r *flowrecord.Record) time.Duration {
	if r.Start.IsZero() {
		return 0
	}
	return r.End.Sub(r.Start)
}

// bitsPerSecond is octets×8 over d, truncated; 0 when d is not positive.
func bitsPerSecond(octets uint64, d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(float64(octets) * 8 / d.Seconds())
}

// minus is a−b, or 0 when a counter went backwards (a restarted connection).
func minus(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
