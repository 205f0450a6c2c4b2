package attrcodec

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
)

// Decode reads a flow record from lr into r (which is reset first). It fails with
// an error naming the attribute when one has the wrong type or an invalid value
// (a labels map over flowrecord.MaxLabels entries included), when the 5-tuple is
// incomplete, or when the record has more than flowrecord.MaxAttributes
// attributes. Attributes it does not know are ignored, so records from newer
// versions still decode. A record in the compact form (compactcodec: its Body
// is bytes) is read from its Body, with errors naming the field.
func Decode(lr plog.LogRecord, r *flowrecord.Record) error { return decode(lr, r, nil) }

// A Decoder decodes as Decode does, and reuses the label maps and the
// Aggregation of the Record it decodes into for the next record decoded into
// it: a record's PodLabels and Aggregation are only valid until the next
// Decode on that Decoder (which takes over the ones r holds). It is for
// callers that are done with a record before they decode the next (the
// exporters); the zero value is ready; it is not safe for concurrent use.
type Decoder struct{ spares spares }

// Decode reads a flow record from lr into r, as the function Decode does.
func (d *Decoder) Decode(lr plog.LogRecord, r *flowrecord.Record) error {
	if m := r.Source.PodLabels; m != nil {
		d.spares.labels[0] = m
	}
	if m := r.Destination.PodLabels; m != nil {
		d.spares.labels[1] = m
	}
	if a := r.Aggregation; a != nil {
		d.spares.aggregation = a
	}
	return decode(lr, r, &d.spares)
}

// spares are the label maps (source, destination) and the Aggregation of
// the records a Decoder decoded, and the addresses it parsed.
type spares struct {
	labels      [2]map[string]string
	aggregation *flowrecord.Aggregation // kept while records without one are decoded
	addrs       addrCache
}

// Take returns an empty map for the labels of slot: the spare one when there
// is one, else a new one of size n (s may be nil).
func (s *spares) Take(slot, n int) map[string]string {
	if s != nil {
		if m := s.labels[slot]; m != nil {
			s.labels[slot] = nil
			clear(m)
			return m
		}
	}
	return make(map[string]string, n)
}

func decode(lr plog.LogRecord, r *flowrecord.Record, s *spares) error {
	if compactcodec.IsCompact(lr) {
		var maps compactcodec.LabelMaps
		if s != nil {
			maps = s
		}
		return compactcodec.Decode(lr, r, maps)
	}
	*r = flowrecord.Record{}
	if n := lr.Attributes().Len(); n > flowrecord.MaxAttributes {
		return fmt.Errorf("record has %d attributes (at most %d); a flow record carries its schema's attributes and a few more", n, flowrecord.MaxAttributes)
	}
	r.End = catalogue.FromLogTimestamp(lr.Timestamp())
	r.Observed = catalogue.FromLogTimestamp(lr.ObservedTimestamp())
	if s != nil && s.aggregation != nil {
		// Decoding an aggregation field fills r.Aggregation (creating it
		// when nil): lend it the spare, taken back below when the record
		// has none.
		*s.aggregation = flowrecord.Aggregation{}
		r.Aggregation = s.aggregation
	}
	attrs := lr.Attributes()
	d := attrDecoder{r: r, s: s}
	err, done := d.fast(attrs) // read_fast.go
	if !done {
		for name, v := range attrs.All() {
			if err = d.attr(name, v); err != nil {
				break
			}
		}
	}
	if !d.sawAggregation {
		r.Aggregation = nil
	}
	switch {
	case err != nil:
		return err
	case !r.Source.Address.IsValid():
		return missing(catalogue.AttrSourceAddress)
	case !r.Destination.Address.IsValid():
		return missing(catalogue.AttrDestinationAddress)
	case !d.sawProtocol && d.sawTransport && r.Protocol == 0:
		// Only a name ProtocolNumber knows stands in for the number;
		// "unknown" (or a name we do not know) would read as protocol 0.
		v, _ := lr.Attributes().Get(catalogue.AttrNetworkTransport)
		return fmt.Errorf("attribute %q: %q names no protocol number, and %q is absent", catalogue.AttrNetworkTransport, v.Str(), catalogue.AttrProtocol)
	case !d.sawProtocol && !d.sawTransport:
		return missing(catalogue.AttrProtocol)
	}
	return nil
}

// An attrDecoder decodes the attributes of one record into r.
type attrDecoder struct {
	r                                         *flowrecord.Record
	s                                         *spares
	next                                      int // Encode writes attributes in catalogue order: look a few ahead of the last one before the map.
	sawProtocol, sawTransport, sawAggregation bool
}

// attr decodes the attribute name.
func (d *attrDecoder) attr(name string, v pcommon.Value) error {
	if a := d.find(name); a != nil {
		return d.decode(a, name, v)
	}
	return nil
}

// find is the attribute called name, nil when it is unknown.
func (d *attrDecoder) find(name string) *attribute {
	a := lookahead(d.next, name)
	if a == nil {
		if a = byName[name]; a == nil {
			return nil
		}
	}
	d.next = a.index + 1
	return a
}

// decode decodes the attribute a, called name, of value v.
func (d *attrDecoder) decode(a *attribute, name string, v pcommon.Value) error {
	var err error
	switch {
	case a.index == transportIndex:
		err = decTransport(d.r, name, v)
	case a.derive != nil: // written for readers only
		return nil
	default:
		err = put(a, a.ref.At(d.r), name, v, d.s)
	}
	if err != nil {
		return err
	}
	d.decoded(a)
	return nil
}

// decoded notes that a was decoded.
func (d *attrDecoder) decoded(a *attribute) {
	d.sawAggregation = d.sawAggregation || a.aggregation
	switch a.index {
	case protocolIndex:
		d.sawProtocol = true
	case transportIndex:
		d.sawTransport = true
	}
}

// decTransport reads the protocol from network.transport, unless
// flow.protocol_identifier (which wins) already set it.
func decTransport(r *flowrecord.Record, name string, v pcommon.Value) error {
	s, err := wantStr(name, v)
	if err != nil {
		return err
	}
	if p, ok := flowrecord.ProtocolNumber(s); ok && r.Protocol == 0 {
		r.Protocol = p
	}
	return nil
}

// put decodes the attribute a, called name, of value v, into p (a.ref.At),
// with the spares of a Decoder (nil: none).
func put(a *attribute, p catalogue.Loc, name string, v pcommon.Value, sp *spares) error {
	if quick(&a.ref, p, v, sp) { // read_fast.go
		return nil
	}
	switch a.ref.Kind {
	case catalogue.KindString:
		return decStr(name, v, p.String())
	case catalogue.KindBool:
		return decBool(name, v, p.Bool())
	case catalogue.KindUint8:
		return decUint(name, v, p.Uint8())
	case catalogue.KindUint16:
		return decUint(name, v, p.Uint16())
	case catalogue.KindUint32:
		return decUint(name, v, p.Uint32())
	case catalogue.KindUint64:
		return decUint(name, v, p.Uint64())
	case catalogue.KindTime:
		return decTime(name, v, p.Time())
	case catalogue.KindAddr:
		return decAddr(name, v, p.Addr())
	case catalogue.KindEnum:
		return decEnum(name, a.ref.Names, v, p.Uint8())
	case catalogue.KindLabels:
		return decLabels(name, v, p.Labels(), a.ref.LabelsSlot, sp)
	case catalogue.KindBytes16:
		return decHex16(name, v, p.Bytes16())
	}
	panic("attrcodec: attribute " + name + " of kind " + a.ref.Kind.String())
}

// The dec* functions decode the attribute name, of value v, into dst.

func decStr(name string, v pcommon.Value, dst *string) error {
	s, err := wantStr(name, v)
	*dst = s
	return err
}

func decBool(name string, v pcommon.Value, dst *bool) error {
	b, ok := boolOf(v)
	if !ok {
		return typeError(name, "bool", v)
	}
	*dst = b
	return nil
}

// decUint decodes an unsigned integer of T's size; a uint64 at most
// math.MaxInt64, as an int attribute holds.
func decUint[T uint8 | uint16 | uint32 | uint64](name string, v pcommon.Value, dst *T) error {
	i, ok := intOf(v)
	if !ok {
		return typeError(name, "int", v)
	}
	if maxV := min(uint64(^T(0)), math.MaxInt64); i < 0 || uint64(i) > maxV {
		return fmt.Errorf("attribute %q: value %d out of range [0, %d]", name, i, maxV)
	}
	*dst = T(i)
	return nil
}

func decAddr(name string, v pcommon.Value, dst *netip.Addr) error {
	s, err := wantStr(name, v)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("attribute %q: %q is not an IP address", name, s)
	}
	*dst = a
	return nil
}

// decTime reads nanoseconds since the Unix epoch.
func decTime(name string, v pcommon.Value, dst *time.Time) error {
	ns, ok := intOf(v)
	if !ok {
		return typeError(name, "int", v)
	}
	if ns <= 0 {
		return fmt.Errorf("attribute %q: %d is not a time after the Unix epoch (ns)", name, ns)
	}
	*dst = time.Unix(0, ns).UTC()
	return nil
}

func decEnum(name string, names []string, v pcommon.Value, dst *uint8) error {
	s, err := wantStr(name, v)
	if err != nil {
		return err
	}
	e, ok := flowrecord.ParseEnum[uint8](names, s)
	if !ok {
		return fmt.Errorf("attribute %q: unknown value %q (want one of %v)", name, s, names[1:])
	}
	*dst = e
	return nil
}

func decLabels(name string, v pcommon.Value, dst *catalogue.Labels, slot int, sp *spares) error {
	m, ok := mapOf(v)
	if !ok {
		return typeError(name, "map", v)
	}
	if n := m.Len(); n > flowrecord.MaxLabels {
		return fmt.Errorf("attribute %q: %d labels (at most %d)", name, n, flowrecord.MaxLabels)
	}
	labels := sp.Take(slot, m.Len())
	*dst = labels
	return eachEntry(m, func(k string, lv pcommon.Value) error { // read_fast.go
		s, ok := strOf(lv)
		if !ok {
			return fmt.Errorf("attribute %q: label %q is %s, want string", name, k, lv.Type())
		}
		labels[k] = s
		return nil
	})
}

// decHex16 reads 16 bytes written as 32 hex digits (the conntrack labels).
func decHex16(name string, v pcommon.Value, dst *catalogue.Bytes16) error {
	s, err := wantStr(name, v)
	if err != nil {
		return err
	}
	if len(s) != 32 {
		return fmt.Errorf("attribute %q: want 32 hex digits, got %d characters", name, len(s))
	}
	if _, err := hex.Decode(dst[:], []byte(s)); err != nil {
		return fmt.Errorf("attribute %q: %v", name, err)
	}
	return nil
}

func wantStr(name string, v pcommon.Value) (string, error) {
	s, ok := strOf(v)
	if !ok {
		return "", typeError(name, "string", v)
	}
	return s, nil
}

func typeError(name, want string, v pcommon.Value) error {
	return fmt.Errorf("attribute %q: want %s, got %s", name, want, v.Type())
}

// ErrMissingAttribute is wrapped by Decode's error for a record without a
// required attribute (or field, in the compact form).
var ErrMissingAttribute = catalogue.ErrMissingAttribute

var missing = catalogue.Missing
