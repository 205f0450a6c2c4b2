package flowrecord

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// decoders maps an attribute name to its schema entry, for Decode.
var decoders = func() map[string]*attribute {
	m := make(map[string]*attribute, len(attributes))
	for i := range attributes {
		attributes[i].index = i
		if attributes[i].dec != nil {
			m[attributes[i].Name] = &attributes[i]
		}
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
		// Encode writes the schema's own name strings: when the name is the
		// same string, no need to compare its bytes (a call).
		if n := attributes[i].Name; len(n) == len(name) && (unsafe.StringData(n) == unsafe.StringData(name) || n == name) {
			return &attributes[i]
		}
	}
	return nil
}

// The positions of the attributes Decode checks the presence of.
var protocolIndex, transportIndex = decoders[AttrProtocol].index, decoders[AttrNetworkTransport].index

// Encode writes r into lr: EventName, Timestamp (flow end), ObservedTimestamp
// (export time), TraceID (hash of the correlation key, when there is one) and
// the attributes of the schema. lr's previous attributes are cleared.
func Encode(r *Record, lr plog.LogRecord) {
	lr.SetEventName(EventName)
	lr.SetTimestamp(timestamp(r.End))
	lr.SetObservedTimestamp(timestamp(r.Observed))
	if r.Key != "" {
		lr.SetTraceID(KeyHash(r.Key))
	} else {
		lr.SetTraceID(pcommon.NewTraceIDEmpty())
	}
	// The attributes are distinct by construction: a MapBuilder appends them
	// in catalogue order without the duplicate-key scan of Map.Put*, which is
	// quadratic in the number of attributes (~100 for an aggregated record).
	n := attributeCounts // upper bounds: zero values are omitted
	if r.Aggregation == nil {
		n = nonAggregationCounts
	}
	labels := len(r.Source.PodLabels) + len(r.Destination.PodLabels)
	e := newEncoder(n.attrs, labels, n.strs+labels, n.ints)
	direct := e.direct()
	for i := range attributes {
		a := &attributes[i]
		switch {
		case a.aggregation && r.Aggregation == nil:
		case direct && a.store.kind != storeFunc && a.store.kind != storeBool:
			e.stored(a, r) // encoder.go
		default:
			a.enc(r, e)
		}
	}
	e.finish(lr.Attributes())
	clearBody(lr) // of a record that was compact
}

// Bounds on what a record may carry, so one record from a faulty or hostile
// peer cannot take a collector's CPU or memory: far above what a flow record
// holds (the schema has about a hundred attributes; Pods rarely carry more
// than a few dozen labels), far below what hurts.
const (
	MaxAttributes = 1024 // attributes of one record
	MaxLabels     = 1024 // entries of one labels attribute
)

// Decode reads a flow record from lr into r (which is reset first). It fails with
// an error naming the attribute when one has the wrong type or an invalid value
// (a labels map over MaxLabels entries included), when the 5-tuple is
// incomplete, or when the record has more than MaxAttributes attributes.
// Attributes it does not know are ignored, so records from newer versions
// still decode. A record in the compact encoding (EncodeCompact: its Body is
// bytes) is read from its Body, with errors naming the field.
func Decode(lr plog.LogRecord, r *Record) error { return decode(lr, r, nil) }

// A Decoder decodes as Decode does, and reuses the label maps and the
// Aggregation of the Record it decodes into for the next record decoded into
// it: a record's PodLabels and Aggregation are only valid until the next
// Decode on that Decoder (which takes over the ones r holds). It is for
// callers that are done with a record before they decode the next (the
// exporters); the zero value is ready; it is not safe for concurrent use.
type Decoder struct{ spares spares }

// Decode reads a flow record from lr into r, as the function Decode does.
func (d *Decoder) Decode(lr plog.LogRecord, r *Record) error {
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
	aggregation *Aggregation // kept while records without one are decoded
	addrs       addrCache
}

// take returns an empty map for the labels of slot: the spare one when there
// is one, else a new one of size n.
func (s *spares) take(slot, n int) map[string]string {
	if s != nil {
		if m := s.labels[slot]; m != nil {
			s.labels[slot] = nil
			clear(m)
			return m
		}
	}
	return make(map[string]string, n)
}

func decode(lr plog.LogRecord, r *Record, s *spares) error {
	if isCompact(lr) {
		return decodeCompact(lr, r, s) // compact.go
	}
	*r = Record{}
	if n := lr.Attributes().Len(); n > MaxAttributes {
		return fmt.Errorf("record has %d attributes (at most %d); a flow record carries its schema's attributes and a few more", n, MaxAttributes)
	}
	r.End = fromTimestamp(lr.Timestamp())
	r.Observed = fromTimestamp(lr.ObservedTimestamp())
	if s != nil && s.aggregation != nil {
		// The aggregation fields' accessors fill r.Aggregation (creating it
		// when nil): lend them the spare, taken back below when the record
		// has none.
		*s.aggregation = Aggregation{}
		r.Aggregation = s.aggregation
	}
	attrs := lr.Attributes()
	d := attrDecoder{r: r, s: s}
	var err error
	if readFast { // pdataread.go
		kvs := entries(attrs)
		// A record this process encoded has the schema's own name strings
		// (source.address, always written, first): the next attribute of
		// the schema is found without comparing a name's bytes.
		own := len(kvs) > 0 && unsafe.StringData(kvs[0].key) == unsafe.StringData(attributes[0].Name)
		for i := 0; i < len(kvs) && err == nil; i++ {
			kv := &kvs[i]
			var a *attribute
			if n := d.next; own && n < len(attributes) && unsafe.StringData(attributes[n].Name) == unsafe.StringData(kv.key) && len(attributes[n].Name) == len(kv.key) {
				a, d.next = &attributes[n], n+1
				if a.dec == nil {
					a = nil // derived
				}
			} else {
				a = d.find(kv.key)
			}
			switch {
			case a == nil:
			case a.store.kind != storeFunc && a.store.quick(a.store.at(r), kv.value.wrapper(), s): // store.go
				d.decoded(a)
			default:
				err = d.decode(a, kv.key, valueAt(kv, attrs))
			}
		}
	} else {
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
		return missing(AttrSourceAddress)
	case !r.Destination.Address.IsValid():
		return missing(AttrDestinationAddress)
	case !d.sawProtocol && d.sawTransport && r.Protocol == 0:
		// Only a name ProtocolNumber knows stands in for the number;
		// "unknown" (or a name we do not know) would read as protocol 0.
		v, _ := lr.Attributes().Get(AttrNetworkTransport)
		return fmt.Errorf("attribute %q: %q names no protocol number, and %q is absent", AttrNetworkTransport, v.Str(), AttrProtocol)
	case !d.sawProtocol && !d.sawTransport:
		return missing(AttrProtocol)
	}
	return nil
}

// An attrDecoder decodes the attributes of one record into r.
type attrDecoder struct {
	r                                         *Record
	s                                         *spares
	next                                      int // Encode writes attributes in schema order: look a few ahead of the last one before the map.
	sawProtocol, sawTransport, sawAggregation bool
}

// attr decodes the attribute name.
func (d *attrDecoder) attr(name string, v pcommon.Value) error {
	if a := d.find(name); a != nil {
		return d.decode(a, name, v)
	}
	return nil
}

// find is the attribute called name, nil when it is unknown or derived.
func (d *attrDecoder) find(name string) *attribute {
	a := lookahead(d.next, name)
	if a == nil {
		if a = decoders[name]; a == nil {
			return nil
		}
	}
	d.next = a.index + 1
	if a.dec == nil {
		return nil // derived, written for readers only
	}
	return a
}

// decode decodes the attribute a, called name, of value v.
func (d *attrDecoder) decode(a *attribute, name string, v pcommon.Value) error {
	var err error
	if a.store.kind != storeFunc {
		err = a.store.put(a.store.at(d.r), name, v, d.s) // store.go
	} else {
		err = a.dec(d.r, name, v, d.s)
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

// ErrMissingAttribute is wrapped by Decode's error for a record without a required attribute.
var ErrMissingAttribute = errors.New("missing required attribute")

func missing(name string) error { return fmt.Errorf("%w %q", ErrMissingAttribute, name) }

func timestamp(t time.Time) pcommon.Timestamp {
	if t.IsZero() {
		return 0
	}
	return pcommon.Timestamp(t.UnixNano())
}

func fromTimestamp(ts pcommon.Timestamp) time.Time {
	if ts == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ts)).UTC()
}
