package flowstreamexporter

import (
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// The seam between a stream's history (ClickHouse) and its live part (the
// ring). The gateway's pipeline gives every record to both the ring and the
// clickhouse_flows exporter, so a record near the seam can be in both, or in
// ClickHouse before it is in the ring, or the other way round. The rule:
//
//  1. The live part starts at the oldest record the ring holds when the
//     stream opens (cursor from), as a stream without history does.
//  2. A history row that is also one of the ring's records from that cursor
//     on (same fingerprint) is left to the live part.
//  3. A history row sent whose end time is at most seamSlack before the
//     oldest end time the ring held is remembered; the live part skips one
//     ring record of the same fingerprint (a record ClickHouse had before the
//     ring did), until seamSlack after the history ended.
//
// So a record is sent once whichever store had it first; what no store
// holds any more (overwritten in the ring, never written to ClickHouse) is
// not sent, and the ring's overwrites are counted in dropped_count as on
// any stream. Identical records (same fingerprint) are interchangeable.

// seamSlack is how late a record may reach the ring after ClickHouse has it,
// and how far behind the ring's oldest end time a late record may end: the
// gateway's batching and queues take seconds, not minutes.
const seamSlack = time.Minute

// fingerprintSeed is per process: fingerprints are only compared within it.
var fingerprintSeed = maphash.MakeSeed()

// fingerprint identifies a record by what the flows table keeps of it: times
// in whole seconds, the 5-tuple, the counters, the flow type and the Pods.
func fingerprint(r *flowrecord.Record) uint64 {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	var b [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = h.Write(b[:])
	}
	num(uint64(r.Start.Unix()))
	num(uint64(r.End.Unix()))
	num(uint64(r.Protocol)<<32 | uint64(r.Source.Port)<<16 | uint64(r.Destination.Port))
	for _, a := range []flowrecord.Endpoint{r.Source, r.Destination} {
		ab := a.Address.Unmap().As16()
		_, _ = h.Write(ab[:])
		_, _ = h.WriteString(a.PodName)
		_ = h.WriteByte(0)
	}
	for _, c := range []flowrecord.Counters{r.Stats, r.ReverseStats} {
		num(c.PacketTotal)
		num(c.OctetTotal)
		num(c.PacketDelta)
		num(c.OctetDelta)
	}
	num(uint64(r.FlowType))
	return h.Sum64()
}

// fingerprints is a multiset of record fingerprints.
type fingerprints map[uint64]int

func (f fingerprints) add(fp uint64) { f[fp]++ }

// take removes one fp and reports whether there was one.
func (f fingerprints) take(fp uint64) bool {
	n := f[fp]
	if n == 0 {
		return false
	}
	if n == 1 {
		delete(f, fp)
	} else {
		f[fp] = n - 1
	}
	return true
}

// ringOldestEnd is the oldest end time of the ring's records from a
// stream's live start on (zero when there are none): whether the stream
// needs history.
func ringOldestEnd(r *ring, from uint64) time.Time {
	var oldest time.Time
	eachHeld(r, from, func(e entry) {
		if oldest.IsZero() || e.rec.End.Before(oldest) {
			oldest = e.rec.End
		}
	})
	return oldest
}

// ringFingerprints are the fingerprints of the ring's records from a
// stream's live start on (seam rule 2).
func ringFingerprints(r *ring, from uint64) fingerprints {
	fps := fingerprints{}
	eachHeld(r, from, func(e entry) { fps.add(fingerprint(e.rec)) })
	return fps
}

// eachHeld calls f with each record the ring holds from cursor from on.
func eachHeld(r *ring, from uint64, f func(entry)) {
	buf := make([]entry, 0, batchSize)
	for cursor := from; ; {
		buf, cursor, _, _, _ = r.read(cursor, batchSize, buf[:0])
		for _, e := range buf {
			f(e)
		}
		if len(buf) < batchSize {
			clear(buf)
			return
		}
	}
}

// liveSkip is rule 3: history rows the live part must not send again.
type liveSkip struct {
	sent  fingerprints
	until time.Time // after this, nothing is skipped
}

// skip reports whether the live part leaves out r, sent by the history.
func (s *liveSkip) skip(r *flowrecord.Record) bool {
	if s == nil || len(s.sent) == 0 || time.Now().After(s.until) {
		return false
	}
	return s.sent.take(fingerprint(r))
}
