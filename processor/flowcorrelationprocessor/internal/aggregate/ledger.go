package aggregate

import "github.com/flowtel/flowtel/internal/flowrecord"

// The ledger is why exported deltas add up to the totals (DESIGN D10).
//
// A Node's counters are cumulative and each of its exports carries the
// total and the delta since its previous export, so an export covers the
// range (total−delta, total] of each counter. The ledger keeps, per counter,
// the lowest start of a range received (low) and how much has been exported
// as deltas (reported); the highest end is the total the entry holds. An
// export's delta is what the span [low, total] holds beyond what was
// reported. Summed over a connection's exports, the deltas telescope to the
// final total minus the lowest start: the final total when the Node reported
// the connection from its beginning (its first delta is its total).
//
// So the order of arrival does not matter and nothing needs telling apart
// for the sums to hold: an exact duplicate covers a range already inside the
// span and adds nothing; a reordered distinct export either lies inside the
// span (its counts are in the later total that was already received, and
// are exported with it) or lies below it (the span grows downward and its
// deltas go out with the next export). A lost export's counts are in the
// next total too. Antrea instead sums the deltas of a side's newer records
// only, losing a late one's, and takes the common deltas from whichever
// side reported last, which double counts when that side alternates.
//
// The common counters get a span of their own: its end is the common total
// (Antrea's: following the side that reported last, never going down), its
// start the lowest start either side reported.
type ledger struct {
	common, source, destination sideLedger
}

// sideLedger is the ledger of one reporter's (or the common) counters.
type sideLedger struct {
	seen     bool
	forward  counterSpans // flowrecord.Record.Stats
	backward counterSpans // flowrecord.Record.ReverseStats
}

type counterSpans struct{ packets, octets span }

type span struct{ low, reported uint64 }

// cover extends l with the ranges r covers and reports whether they reached
// below what l covered.
func (l *sideLedger) cover(r *flowrecord.Record) bool {
	first := !l.seen
	l.seen = true
	f := l.forward.cover(&r.Stats, first)
	b := l.backward.cover(&r.ReverseStats, first)
	return f || b
}

func (c *counterSpans) cover(in *flowrecord.Counters, first bool) bool {
	p := c.packets.cover(in.PacketTotal, in.PacketDelta, first)
	o := c.octets.cover(in.OctetTotal, in.OctetDelta, first)
	return p || o
}

func (s *span) cover(total, delta uint64, first bool) bool {
	low := minus(total, delta) // a delta above its total would be bad input: count from 0
	if first || low < s.low {
		s.low = low
		return !first
	}
	return false
}

// settle writes into out the deltas of an export whose totals are out's,
// and counts them as reported.
func (l *sideLedger) settle(out, outReverse *flowrecord.Counters) {
	l.forward.settle(out)
	l.backward.settle(outReverse)
}

func (c *counterSpans) settle(out *flowrecord.Counters) {
	out.PacketDelta = c.packets.settle(out.PacketTotal)
	out.OctetDelta = c.octets.settle(out.OctetTotal)
}

func (s *span) settle(total uint64) uint64 {
	d := minus(minus(total, s.low), s.reported)
	s.reported += d
	return d
}

// settle writes the deltas of an export of rec and agg (copies of the
// entry's record and statistics) and counts them as reported.
func (l *ledger) settle(rec *flowrecord.Record, agg *flowrecord.Aggregation) {
	l.common.settle(&rec.Stats, &rec.ReverseStats)
	l.source.settle(&agg.StatsFromSource, &agg.ReverseStatsFromSource)
	l.destination.settle(&agg.StatsFromDestination, &agg.ReverseStatsFromDestination)
}
