// Package compactcodec is flowtel's own form of a flow record for the hop
// between its node collectors and its gateways (architecture decision D13):
// the LogRecord fields as the attribute form writes them, two attributes
// (AttrRecordEncoding, and flow.key, which load_balancing routes on) and the
// rest of the Record as bytes in the Body. It is not a public schema: the
// gateway reads it and writes the attribute form (docs/flow-schema.md) for
// everything downstream.
//
// Version 1 body: the catalogue's fields that live in the Record (those with
// a Ref) except flow.key, in catalogue order, each
//
//	uint8, enum, bool  one byte (enums within their names, bools 0 or 1)
//	uint16/32/64       unsigned LEB128 varint (within the type's range)
//	time               signed zigzag varint of ns since the Unix epoch, 0 = unset
//	string             varint length, then the UTF-8 bytes as they are
//	address            one byte 0 (unset), 4 (IPv4: 4 bytes), 16 (IPv6: 16 bytes)
//	                   or 17 (IPv6 with a zone: 16 bytes, then the zone as a string)
//	labels             varint n+1 (0 = nil, 1 = empty), then n × (key, value) strings
//	bytes16            one byte 0 (all zero) or 16, then 16 bytes (the ct_label)
//
// with one byte 0 (no Aggregation: the body ends) or 1 before the first
// aggregation field, which are last. End and Observed are the LogRecord
// Timestamp and ObservedTimestamp, Key the flow.key attribute, ClusterUID the
// resource's, as in the attribute form. Nothing may follow the last field.
//
// The layout follows from the catalogue's order: a field added, moved or
// removed there is a new version (a test pins version 1's field list). A
// reader refuses versions it does not know, so gateways are upgraded before
// the node collectors, and a new version keeps the reader of the previous one.
package compactcodec

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// AttrRecordEncoding is the attribute naming the encoding of a record that is
// not in the attribute form, and its version (EncodingCompactV1).
const AttrRecordEncoding = "flowtel.record.encoding"

// EncodingCompactV1 is the value of AttrRecordEncoding on a record in version
// 1 of the compact encoding.
const EncodingCompactV1 = "compact/1"

// compactAttributes bounds the attributes a record may carry to be read as
// compact without a bytes Body (to name what is wrong with it): a compact
// record has two, an attribute-form one at least three.
const compactAttributes = 2

// field is a field of the body: its attribute's name (errors name it) and
// where it lives in the Record.
type field struct {
	name string
	ref  catalogue.Ref
}

// fields are the body's fields before the Aggregation's presence byte,
// aggregationFields those after it.
var fields, aggregationFields = func() (plain, agg []field) {
	for _, f := range catalogue.Fields() {
		if f.Ref.Kind == catalogue.KindNone || f.Attribute == catalogue.AttrKey {
			continue
		}
		switch {
		case f.Aggregation:
			agg = append(agg, field{f.Attribute, f.Ref})
		case len(agg) > 0:
			panic("compactcodec: the catalogue has field " + f.Attribute + " after the aggregation fields")
		default:
			plain = append(plain, field{f.Attribute, f.Ref})
		}
	}
	return plain, agg
}()

// aggregationPresence names the presence byte in errors.
const aggregationPresence = "flow.aggregation"

// IsCompact reports whether lr is in the compact encoding: its Body is bytes,
// or it carries AttrRecordEncoding and too few attributes for the attribute form.
func IsCompact(lr plog.LogRecord) bool {
	if lr.Body().Type() == pcommon.ValueTypeBytes {
		return true
	}
	if lr.Attributes().Len() > compactAttributes {
		return false
	}
	_, ok := lr.Attributes().Get(AttrRecordEncoding)
	return ok
}
