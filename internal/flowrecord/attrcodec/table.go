package attrcodec

import (
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// attribute is the codec's entry for a field carried as a LogRecord
// attribute: small, as Encode and Decode walk the table for every record.
type attribute struct {
	Name        string
	aggregation bool // written only when Record.Aggregation is set
	always      bool // written when zero
	index       int  // position in attributes
	ref         catalogue.Ref
	// derive is a derived attribute's value, written for readers and not
	// decoded (but see AttrNetworkTransport); nil for the others.
	derive func(*flowrecord.Record) string
}

// attributes are the catalogue's fields carried as attributes, in catalogue order.
var attributes = func() []attribute {
	var as []attribute
	for _, f := range catalogue.Fields() {
		if f.Attribute == "" {
			continue
		}
		a := attribute{Name: f.Attribute, aggregation: f.Aggregation, always: f.WrittenWhenZero, index: len(as), ref: f.Ref}
		if f.Derived {
			a.derive = f.Value.String
		}
		as = append(as, a)
	}
	return as
}()

// byName maps an attribute name to its entry, for Decode.
var byName = func() map[string]*attribute {
	m := make(map[string]*attribute, len(attributes))
	for i := range attributes {
		m[attributes[i].Name] = &attributes[i]
	}
	return m
}()

// lookaheadWindow is how many attributes past the previous one Decode tries
// before the map: the ones in between are absent (zero values are omitted).
const lookaheadWindow = 8

// lookahead is the attribute called name among the lookaheadWindow from index
// next on, nil when there is none.
func lookahead(next int, name string) *attribute {
	for i := next; i < len(attributes) && i < next+lookaheadWindow; i++ {
		// Encode writes the catalogue's own name strings: when the name is
		// the same string, no need to compare its bytes (a call).
		if n := attributes[i].Name; sameString(n, name) {
			return &attributes[i]
		}
	}
	return nil
}

// The positions of the attributes Decode checks the presence of.
var protocolIndex, transportIndex = byName[catalogue.AttrProtocol].index, byName[catalogue.AttrNetworkTransport].index

// The attributes of each type, for sizing Encode's buffers: all of them, and
// those written for a record without Aggregation.
var attributeCounts, nonAggregationCounts = func() (all, plain typeCounts) {
	for _, f := range catalogue.Fields() {
		if f.Attribute == "" {
			continue
		}
		c := typeCounts{attrs: 1}
		switch f.AttrType {
		case "string":
			c.strs = 1
		case "int":
			c.ints = 1
		}
		all = all.plus(c)
		if !f.Aggregation {
			plain = plain.plus(c)
		}
	}
	return all, plain
}()

type typeCounts struct{ attrs, strs, ints int }

func (c typeCounts) plus(d typeCounts) typeCounts {
	return typeCounts{c.attrs + d.attrs, c.strs + d.strs, c.ints + d.ints}
}
