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
// totals and deltas as reported, throughput over the record's whole life.
func initStats(e *entry, r *flowrecord.Record, h half) {
	a := &e.agg
	life := lifetime(r)
	a.Throughput = bitsPerSecond(r.Stats.OctetTotal, life)
	a.ReverseThroughput = bitsPerSecond(r.ReverseStats.OctetTotal, life)
	src, dst := sidesOf(e.required, h)
	if src {
		fillSide(sourceSide(a), r, a)
	}
	if dst {
		fillSide(destinationSide(a), r, a)
	}
}

func fillSide(s side, r *flowrecord.Record, a *flowrecord.Aggregation) {
	*s.end = r.End
	*s.stats, *s.reverse = r.Stats, r.ReverseStats
	*s.throughput, *s.reverseTP = a.Throughput, a.ReverseThroughput
}

// addStats folds a subsequent record into e, with Antrea's rules: per-side
// totals are replaced and per-side deltas summed until the next export; the
// common counters follow the side that reported last; throughputs are bits/s
// over the gap between that side's previous and current end timestamps. It
// reports whether r brought anything new: a record that is not later than
// the last one of its side (a duplicate, or overtaken by a newer one) changes
// nothing. Antrea would still move that side's end timestamp back; we never
// do, so that duplicates and reordering cannot distort the next throughput.
func addStats(e *entry, r *flowrecord.Record, h half) bool {
	latest := !r.End.Before(e.rec.End)
	src, dst := sidesOf(e.required, h)
	fresh := false
	if src {
		fresh = updateSide(e, sourceSide(&e.agg), r, latest) || fresh
	}
	if dst {
		fresh = updateSide(e, destinationSide(&e.agg), r, latest) || fresh
	}
	if !fresh {
		return false
	}
	if latest {
		e.rec.End = r.End
		e.rec.TCPState = r.TCPState
	}
	if e.rec.EndReason != flowrecord.EndReasonEndOfFlow {
		e.rec.EndReason = r.EndReason
	}
	return true
}

func updateSide(e *entry, s side, r *flowrecord.Record, latest bool) bool {
	prev := *s.end
	if prev.IsZero() {
		prev = r.Start
	}
	if !r.End.After(prev) {
		return false
	}
	*s.end = r.End
	gap := r.End.Sub(prev)
	*s.throughput = bitsPerSecond(minus(r.Stats.OctetTotal, s.stats.OctetTotal), gap)
	*s.reverseTP = bitsPerSecond(minus(r.ReverseStats.OctetTotal, s.reverse.OctetTotal), gap)
	replaceTotals(s.stats, &r.Stats)
	replaceTotals(s.reverse, &r.ReverseStats)
	if latest {
		followSide(&e.rec.Stats, s.stats)
		followSide(&e.rec.ReverseStats, s.reverse)
		e.agg.Throughput, e.agg.ReverseThroughput = *s.throughput, *s.reverseTP
	}
	return true
}

// replaceTotals takes the reporter's latest totals and adds its deltas to
// those accumulated since the last export.
func replaceTotals(side, in *flowrecord.Counters) {
	side.PacketTotal, side.OctetTotal = in.PacketTotal, in.OctetTotal
	side.PacketDelta += in.PacketDelta
	side.OctetDelta += in.OctetDelta
}

// followSide updates the common counters from the side that reported last:
// totals never go down, deltas are that side's accumulated deltas.
func followSide(common, side *flowrecord.Counters) {
	common.PacketTotal = max(common.PacketTotal, side.PacketTotal)
	common.OctetTotal = max(common.OctetTotal, side.OctetTotal)
	common.PacketDelta, common.OctetDelta = side.PacketDelta, side.OctetDelta
}

// resetAfterExport clears what is reported "since the last export": all
// deltas and all throughputs; totals stay.
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
