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
// totals as reported, the counter ranges it covers (so its deltas are
// exported), throughput over the record's whole life.
func initStats(e *entry, r *flowrecord.Record, h half) {
	a := &e.agg
	life := lifetime(r)
	a.Throughput = bitsPerSecond(r.Stats.OctetTotal, life)
	a.ReverseThroughput = bitsPerSecond(r.ReverseStats.OctetTotal, life)
	e.rec.Stats, e.rec.ReverseStats = totalsOf(r.Stats), totalsOf(r.ReverseStats)
	e.ledger.common.cover(r)
	src, dst := sidesOf(e.required, h)
	if src {
		fillSide(sourceSide(a), r, a)
		e.ledger.source.cover(r)
	}
	if dst {
		fillSide(destinationSide(a), r, a)
		e.ledger.destination.cover(r)
	}
}

func fillSide(s side, r *flowrecord.Record, a *flowrecord.Aggregation) {
	*s.end = r.End
	*s.stats, *s.reverse = totalsOf(r.Stats), totalsOf(r.ReverseStats)
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
// timestamps. Deltas do not: they come from the ledger (see ledger), so they
// add up to the totals whatever the order of arrival. It reports whether r
// brought anything new to export: a newer record does, a reordered one only
// when it covers counts no record before it covered; a duplicate never does.
// Antrea would move a side's end timestamp back on an older record; we never
// do, so that duplicates and reordering cannot distort the next throughput.
func addStats(e *entry, r *flowrecord.Record, h half) (fresh bool, what arrival) {
	latest := !r.End.Before(e.rec.End)
	src, dst := sidesOf(e.required, h)
	fresh = e.ledger.common.cover(r)
	what = arrivalDuplicate
	if src {
		f, w := updateSide(e, sourceSide(&e.agg), &e.ledger.source, r, latest)
		fresh, what = fresh || f, min(what, w)
	}
	if dst {
		f, w := updateSide(e, destinationSide(&e.agg), &e.ledger.destination, r, latest)
		fresh, what = fresh || f, min(what, w)
	}
	if !fresh {
		return false, what
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

func updateSide(e *entry, s side, l *sideLedger, r *flowrecord.Record, latest bool) (fresh bool, what arrival) {
	extended := l.cover(r)
	prev := *s.end
	if !prev.IsZero() && !r.End.After(prev) {
		what = arrivalReordered
		if r.End.Equal(prev) && sameTotals(&r.Stats, s.stats) && sameTotals(&r.ReverseStats, s.reverse) {
			what = arrivalDuplicate
		}
		return extended, what
	}
	if prev.IsZero() {
		prev = r.Start
	}
	*s.end = r.End
	gap := r.End.Sub(prev)
	*s.throughput = bitsPerSecond(minus(r.Stats.OctetTotal, s.stats.OctetTotal), gap)
	*s.reverseTP = bitsPerSecond(minus(r.ReverseStats.OctetTotal, s.reverse.OctetTotal), gap)
	*s.stats, *s.reverse = totalsOf(r.Stats), totalsOf(r.ReverseStats)
	if latest {
		followSide(&e.rec.Stats, s.stats)
		followSide(&e.rec.ReverseStats, s.reverse)
		e.agg.Throughput, e.agg.ReverseThroughput = *s.throughput, *s.reverseTP
	}
	return true, arrivalNewer
}

// followSide updates the common totals from the side that reported last;
// they never go down.
func followSide(common, side *flowrecord.Counters) {
	common.PacketTotal = max(common.PacketTotal, side.PacketTotal)
	common.OctetTotal = max(common.OctetTotal, side.OctetTotal)
}

func totalsOf(c flowrecord.Counters) flowrecord.Counters {
	return flowrecord.Counters{PacketTotal: c.PacketTotal, OctetTotal: c.OctetTotal}
}

func sameTotals(a, b *flowrecord.Counters) bool {
	return a.PacketTotal == b.PacketTotal && a.OctetTotal == b.OctetTotal
}

// resetAfterExport clears the throughputs, which are reported "since the
// last export"; totals stay, and deltas are the ledger's.
func resetAfterExport(e *entry) {
	a := &e.agg
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
