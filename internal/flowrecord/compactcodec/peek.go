package compactcodec

// Peeking: a few fields of a compact record, the body checked as Decode
// checks it, without building the rest.

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// A Selection is the body fields Peek keeps (Select makes one).
type Selection struct {
	plain, agg []bool // by the index in fields, aggregationFields
}

// Select is the Selection of the body fields named by their attributes
// (the catalogue's), and of source.address and destination.address, which
// every record has. It panics on a name that is no body field (flow.key is
// not one: Peek always reads it), so a caller's list is checked when its
// package is initialised.
func Select(attributes ...string) *Selection {
	s := &Selection{plain: make([]bool, len(fields)), agg: make([]bool, len(aggregationFields))}
	required := []string{catalogue.AttrSourceAddress, catalogue.AttrDestinationAddress}
	for _, a := range slices.Concat(attributes, required) {
		if !s.add(a) {
			panic("compactcodec: " + a + " is not a field of the compact body")
		}
	}
	return s
}

func (s *Selection) add(attribute string) bool {
	for _, part := range []struct {
		fs   []field
		keep []bool
	}{{fields, s.plain}, {aggregationFields, s.agg}} {
		for i := range part.fs {
			if part.fs[i].name == attribute {
				part.keep[i] = true
				return true
			}
		}
	}
	return false
}

// Peek reads a record IsCompact says is compact from lr into r (which is
// reset first) as Decode does, but keeps only the body fields sel selects,
// and Key, End and Observed, which live outside the body: every other field
// of r is left zero (r.Aggregation is nil unless sel selects an aggregation
// field), and no labels map is built unless sel selects it. The whole body is
// read and checked as Decode checks it, so Peek refuses exactly the records
// Decode refuses, with the same error. r's strings are views of lr's Body
// (no copy of it is made): they are valid while the Body is not changed, and
// a caller copies any it keeps longer. A nil sel selects every field.
//
// It is for a component that checks a few fields of each record and passes
// the record on as it came (node_identity), so that the record is decoded
// once in the process, by the component that uses all of it.
func Peek(lr plog.LogRecord, r *flowrecord.Record, sel *Selection) error {
	return read(lr, r, nil, sel, bodyView)
}
