package flowcorrelationprocessor

import (
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/aggregate"
)

// decodeBuffer is what one batch of aggregate mode decodes into: the
// records, and empty label maps for them from the table's forgotten
// connections (aggregate.Settings.RecycleLabels), so that a steady stream of
// connections does not allocate a map per record. A record's maps go into
// the table with it; the table hands them back when it forgets it.
type decodeBuffer struct {
	recs   []flowrecord.Record
	labels []map[string]string // empty maps, to decode into
	dec    attrcodec.Decoder
	// held: dec holds an empty map for the source, destination labels (it
	// keeps the maps it is given until a record has labels there).
	held [2]bool
}

func newDecodeBuffer() any { return &decodeBuffer{recs: make([]flowrecord.Record, 0, 64)} }

// lend gives r, about to be decoded into with dec, a map for each side
// whose decoder holds none.
func (b *decodeBuffer) lend(r *flowrecord.Record) {
	for side, m := range [2]*map[string]string{&r.Source.PodLabels, &r.Destination.PodLabels} {
		if !b.held[side] && len(b.labels) > 0 {
			*m = b.labels[len(b.labels)-1]
			b.labels[len(b.labels)-1] = nil
			b.labels = b.labels[:len(b.labels)-1]
			b.held[side] = true
		}
	}
}

// settle notes, after r was decoded, which maps dec used: a side that has
// labels took the one it held.
func (b *decodeBuffer) settle(r *flowrecord.Record) {
	if r.Source.PodLabels != nil {
		b.held[0] = false
	}
	if r.Destination.PodLabels != nil {
		b.held[1] = false
	}
}

// refill takes from tbl, under the processor's lock, the maps of forgotten
// connections the next batch of n records may need (two a record at most).
func (b *decodeBuffer) refill(tbl *aggregate.Table, n int) {
	for len(b.labels) < 2*n {
		m := tbl.TakeLabels()
		if m == nil {
			return
		}
		b.labels = append(b.labels, m)
	}
}
