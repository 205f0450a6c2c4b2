package aggregate

import "github.com/flowtel/flowtel/internal/flowrecord"

// Why exported deltas add up to the totals (decision D10).
//
// A Node's counters are cumulative and each of its exports carries the
// total and the delta since its previous export, so an export covers the
// range (total−delta, total] of each counter. Per side and counter, the
// entry keeps the span the side's records covered: its lowest start (lows)
// and its end (the side's total). The delta of an export is how much the
// span grew since the previous export: at the top when a newer record
// raised the total, at the bottom when an older one reached below. Summed
// over a connection's exports, the deltas telescope to the final total
// minus the lowest start: the final total when the Node reported the
// connection from its beginning (its first delta is its total).
//
// So the order of arrival does not matter and nothing needs telling apart
// for the sums to hold: an exact duplicate covers a range already inside the
// span and adds nothing; a reordered distinct export either lies inside the
// span (its counts are in a later total already received, and exported with
// it) or reaches below it (its deltas go out with the next export). A lost
// export's counts are in the next total too. Antrea instead sums the deltas
// of a side's newer records only, losing a late one's, and takes the common
// deltas from whichever side reported last, which double counts when that
// side alternates.
//
// The common counters count the connection once, not once per Node: their
// span ends at the higher of the sides' totals and starts at the higher of
// the sides' lowest starts. The higher, not the lower, because a process
// may not hold the connection's whole history: after a gateway restart, a
// replica change mid-connection or an entry forgotten after its inactive
// timeout, each Node's next export starts where its previous one (sent to
// the other process or entry) ended, and the common counts up to the higher
// of those two ends went out already, with the common totals of the
// previous process. So the common span of one process starts where the
// previous one's ended, and the deltas of all of them add up to the totals
// without any of them knowing what another exported. The start is settled
// when the entry is first exported (a pair waits for its second half) and
// only moves down after that (a reordered older record); a side that first
// shows up after an unpaired export cannot raise it.
//
// Antrea instead takes the common totals from the side that reported last
// (by end timestamp) and keeps no span at all.

// lows are the lowest starts of the ranges one side's records covered, per counter.
type lows struct {
	packets, octets, reversePackets, reverseOctets uint64
}

// lowsOf is where the ranges r covers start: total − delta (from 0 when a
// delta exceeds its total, which only bad input does).
func lowsOf(r *flowrecord.Record) lows {
	return lows{minus(r.Stats.PacketTotal, r.Stats.PacketDelta), minus(r.Stats.OctetTotal, r.Stats.OctetDelta),
		minus(r.ReverseStats.PacketTotal, r.ReverseStats.PacketDelta), minus(r.ReverseStats.OctetTotal, r.ReverseStats.OctetDelta)}
}

// lower moves l down to o where o is lower, and returns by how much.
func (l *lows) lower(o lows) lows {
	drop := l.minus(o)
	*l = minLows(*l, o)
	return drop
}

// minus is l−o per counter, 0 where o is not lower.
func (l lows) minus(o lows) lows {
	return lows{minus(l.packets, o.packets), minus(l.octets, o.octets),
		minus(l.reversePackets, o.reversePackets), minus(l.reverseOctets, o.reverseOctets)}
}

func (l lows) zero() bool { return l == lows{} }

// maxLows is the higher of a and b, per counter.
func maxLows(a, b lows) lows {
	return lows{max(a.packets, b.packets), max(a.octets, b.octets),
		max(a.reversePackets, b.reversePackets), max(a.reverseOctets, b.reverseOctets)}
}

// minLows is the lower of a and b, per counter.
func minLows(a, b lows) lows {
	return lows{min(a.packets, b.packets), min(a.octets, b.octets),
		min(a.reversePackets, b.reversePackets), min(a.reverseOctets, b.reverseOctets)}
}

// addDeltas adds to the unexported deltas of stats and reverse.
func addDeltas(stats, reverse *flowrecord.Counters, d lows) {
	stats.PacketDelta += d.packets
	stats.OctetDelta += d.octets
	reverse.PacketDelta += d.reversePackets
	reverse.OctetDelta += d.reverseOctets
}

// spanOf is what a span from low to the totals of stats and reverse holds.
func spanOf(stats, reverse *flowrecord.Counters, low lows) lows {
	return lows{minus(stats.PacketTotal, low.packets), minus(stats.OctetTotal, low.octets),
		minus(reverse.PacketTotal, low.reversePackets), minus(reverse.OctetTotal, low.reverseOctets)}
}
