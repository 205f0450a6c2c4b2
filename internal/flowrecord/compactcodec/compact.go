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
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/xpdata"

	"github.com/flowtel/flowtel/internal/flowrecord"
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

// buffers are scratch buffers for Encode's body.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Encode writes r into lr in the compact encoding: EventName, Timestamp,
// ObservedTimestamp and TraceID as the attribute form writes them, the
// attributes AttrRecordEncoding and flow.key (when r has a key; lr's previous
// attributes are cleared) and the rest of r as bytes in the Body.
// attrcodec.Decode reads it back; only flowtel's own components should be
// given it.
func Encode(r *flowrecord.Record, lr plog.LogRecord) {
	lr.SetEventName(flowrecord.EventName)
	lr.SetTimestamp(catalogue.LogTimestamp(r.End))
	lr.SetObservedTimestamp(catalogue.LogTimestamp(r.Observed))
	var b xpdata.MapBuilder
	if r.Key != "" {
		lr.SetTraceID(flowrecord.KeyHash(r.Key))
		b.EnsureCapacity(2)
		b.AppendEmpty(catalogue.AttrKey).SetStr(r.Key)
	} else {
		lr.SetTraceID(pcommon.NewTraceIDEmpty())
		b.EnsureCapacity(1)
	}
	b.AppendEmpty(AttrRecordEncoding).SetStr(EncodingCompactV1)
	b.UnsafeIntoMap(lr.Attributes())

	buf := buffers.Get().(*[]byte)
	w := writer{b: (*buf)[:0]}
	w.record(r)
	lr.Body().SetEmptyBytes().FromRaw(w.b) // copies
	*buf = w.b
	buffers.Put(buf)
}

type writer struct{ b []byte }

func (w *writer) u8(v uint8)       { w.b = append(w.b, v) }
func (w *writer) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *writer) boolean(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *writer) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) time(t time.Time) {
	if t.IsZero() {
		w.u8(0)
		return
	}
	w.b = binary.AppendVarint(w.b, t.UnixNano())
}

func (w *writer) addr(a netip.Addr) {
	switch {
	case !a.IsValid():
		w.u8(0)
	case a.Is4():
		w.u8(4)
		b := a.As4()
		w.b = append(w.b, b[:]...)
	default:
		b := a.As16()
		if z := a.Zone(); z != "" {
			w.u8(17)
			w.b = append(w.b, b[:]...)
			w.str(z)
			return
		}
		w.u8(16)
		w.b = append(w.b, b[:]...)
	}
}

func (w *writer) labels(m map[string]string) {
	if m == nil {
		w.u8(0)
		return
	}
	w.uvarint(uint64(len(m)) + 1)
	for k, v := range m {
		w.str(k)
		w.str(v)
	}
}

// record writes the version 1 body; reader.record reads it.
func (w *writer) record(r *flowrecord.Record) {
	w.fields(fields, unsafe.Pointer(r))
	if r.Aggregation == nil {
		w.u8(0)
		return
	}
	w.u8(1)
	w.fields(aggregationFields, unsafe.Pointer(r.Aggregation))
}

// fields writes fs, at their offsets from base.
func (w *writer) fields(fs []field, base unsafe.Pointer) {
	for i := range fs {
		p := unsafe.Add(base, fs[i].ref.Offset)
		switch fs[i].ref.Kind {
		case catalogue.KindUint8, catalogue.KindEnum:
			w.u8(*(*uint8)(p))
		case catalogue.KindBool:
			w.boolean(*(*bool)(p))
		case catalogue.KindUint16:
			w.uvarint(uint64(*(*uint16)(p)))
		case catalogue.KindUint32:
			w.uvarint(uint64(*(*uint32)(p)))
		case catalogue.KindUint64:
			w.uvarint(*(*uint64)(p))
		case catalogue.KindTime:
			w.time(*(*time.Time)(p))
		case catalogue.KindString:
			w.str(*(*string)(p))
		case catalogue.KindAddr:
			w.addr(*(*netip.Addr)(p))
		case catalogue.KindLabels:
			w.labels(*(*catalogue.Labels)(p))
		case catalogue.KindBytes16:
			if b := (*catalogue.Bytes16)(p); *b == (catalogue.Bytes16{}) {
				w.u8(0)
			} else {
				w.u8(16)
				w.b = append(w.b, b[:]...)
			}
		default:
			panic("compactcodec: field " + fs[i].name + " of kind " + fs[i].ref.Kind.String())
		}
	}
}

// LabelMaps hands out the maps Decode fills with labels, so a decoder can
// reuse the previous record's; nil: new maps.
type LabelMaps interface {
	// Take returns an empty map for the labels of slot (0 source, 1
	// destination), with room for n.
	Take(slot, n int) map[string]string
}

// Decode reads a record IsCompact says is compact from lr into r (which is
// reset first), its labels maps from maps (nil: new ones). Errors name the
// field that is wrong.
func Decode(lr plog.LogRecord, r *flowrecord.Record, maps LabelMaps) error {
	*r = flowrecord.Record{}
	attrs := lr.Attributes()
	if n := attrs.Len(); n > flowrecord.MaxAttributes {
		return fmt.Errorf("record has %d attributes (at most %d); a compact flow record carries %d", n, flowrecord.MaxAttributes, compactAttributes)
	}
	v, ok := attrs.Get(AttrRecordEncoding)
	if !ok {
		return fmt.Errorf("attribute %q: missing on a record whose Body is bytes; a flow record in the attribute form has no Body, a compact one names its encoding", AttrRecordEncoding)
	}
	if v.Type() != pcommon.ValueTypeStr {
		return typeError(AttrRecordEncoding, "string", v)
	}
	if v.Str() != EncodingCompactV1 {
		return fmt.Errorf("attribute %q: unknown encoding (got %q; this collector reads %q); upgrade the gateways before the node collectors", AttrRecordEncoding, v.Str(), EncodingCompactV1)
	}
	if t := lr.Body().Type(); t != pcommon.ValueTypeBytes {
		return fmt.Errorf("attribute %q: %q, but the Body is %s, want Bytes", AttrRecordEncoding, EncodingCompactV1, t)
	}
	if k, ok := attrs.Get(catalogue.AttrKey); ok {
		if k.Type() != pcommon.ValueTypeStr {
			return typeError(catalogue.AttrKey, "string", k)
		}
		r.Key = k.Str()
	}
	r.End = catalogue.FromLogTimestamp(lr.Timestamp())
	r.Observed = catalogue.FromLogTimestamp(lr.ObservedTimestamp())
	// One copy of the body, as a string the record's strings are slices of
	// (one allocation for all of them). AsRaw copies already and nothing else
	// holds that copy, so it becomes the string as it is.
	raw := lr.Body().Bytes().AsRaw()
	d := reader{s: unsafe.String(unsafe.SliceData(raw), len(raw)), maps: maps}
	d.record(r)
	if d.err == nil && d.i < len(d.s) {
		d.fail("body", fmt.Sprintf("%d bytes after the last field", len(d.s)-d.i))
	}
	switch {
	case d.err != nil:
		return d.err
	case !r.Source.Address.IsValid():
		return catalogue.Missing(catalogue.AttrSourceAddress)
	case !r.Destination.Address.IsValid():
		return catalogue.Missing(catalogue.AttrDestinationAddress)
	}
	return nil
}

// reader reads a version 1 body. The first error is kept and ends the
// reading: every read after it returns zero.
type reader struct {
	s    string
	i    int
	err  error
	maps LabelMaps
}

// fail records what is wrong with field, unless an earlier error is recorded.
func (d *reader) fail(field, what string) {
	if d.err == nil {
		d.err = fmt.Errorf("attribute %q %s: field %q: %s", AttrRecordEncoding, EncodingCompactV1, field, what)
	}
	d.i = len(d.s)
}

func (d *reader) truncated(field string) {
	if d.err == nil {
		d.fail(field, "the Body ends before it (truncated)")
	}
}

func (d *reader) u8(field string) uint8 {
	if d.i >= len(d.s) {
		d.truncated(field)
		return 0
	}
	c := d.s[d.i]
	d.i++
	return c
}

func (d *reader) uvarint(field string) uint64 {
	var x uint64
	for shift := uint(0); ; shift += 7 {
		if d.i >= len(d.s) {
			d.truncated(field)
			return 0
		}
		c := d.s[d.i]
		d.i++
		if shift == 63 && c > 1 {
			d.fail(field, "varint overflows 64 bits")
			return 0
		}
		if c < 0x80 {
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
	}
}

// uint reads a varint of at most maxV.
func (d *reader) uint(field string, maxV uint64) uint64 {
	v := d.uvarint(field)
	if v > maxV {
		d.fail(field, fmt.Sprintf("value %d out of range [0, %d]", v, maxV))
		return 0
	}
	return v
}

func (d *reader) u16(field string) uint16 { return uint16(d.uint(field, math.MaxUint16)) }
func (d *reader) u32(field string) uint32 { return uint32(d.uint(field, math.MaxUint32)) }

// enum reads a byte naming one of names (0: unset).
func (d *reader) enum(field string, names []string) uint8 {
	v := d.u8(field)
	if int(v) >= len(names) {
		d.fail(field, fmt.Sprintf("unknown value %d (want at most %d)", v, len(names)-1))
		return 0
	}
	return v
}

func (d *reader) boolean(field string) bool {
	switch d.u8(field) {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(field, fmt.Sprintf("bool is %d, want 0 or 1", d.s[d.i-1]))
	return false
}

func (d *reader) str(field string) string {
	n := d.uvarint(field)
	if left := uint64(len(d.s) - d.i); n > left {
		if d.err == nil {
			d.fail(field, fmt.Sprintf("length %d runs past the end of the Body (%d bytes left)", n, left))
		}
		return ""
	}
	s := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return s
}

// raw reads n bytes ("" and an error when fewer are left).
func (d *reader) raw(field string, n int) (string, bool) {
	if len(d.s)-d.i < n {
		d.truncated(field)
		return "", false
	}
	b := d.s[d.i : d.i+n]
	d.i += n
	return b, true
}

func (d *reader) time(field string) time.Time {
	u := d.uvarint(field)
	ns := int64(u>>1) ^ -int64(u&1) // zigzag, as binary.AppendVarint writes it
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func (d *reader) addr(field string) netip.Addr {
	switch tag := d.u8(field); tag {
	case 0:
		return netip.Addr{}
	case 4:
		var b [4]byte
		if s, ok := d.raw(field, 4); ok {
			copy(b[:], s)
			return netip.AddrFrom4(b)
		}
	case 16, 17:
		var b [16]byte
		s, ok := d.raw(field, 16)
		if !ok {
			return netip.Addr{}
		}
		copy(b[:], s)
		a := netip.AddrFrom16(b)
		if tag == 17 {
			z := d.str(field)
			if z == "" && d.err == nil {
				d.fail(field, "IPv6 address with an empty zone")
			}
			a = a.WithZone(z)
		}
		return a
	default:
		d.fail(field, fmt.Sprintf("address tag %d, want 0, 4, 16 or 17", tag))
	}
	return netip.Addr{}
}

func (d *reader) labels(field string, slot int) map[string]string {
	n := d.uvarint(field)
	if n == 0 {
		return nil
	}
	n--
	if n > flowrecord.MaxLabels {
		d.fail(field, fmt.Sprintf("%d labels (at most %d)", n, flowrecord.MaxLabels))
		return nil
	}
	if left := uint64(len(d.s) - d.i); n > left/2 { // a label takes two bytes at least
		d.fail(field, fmt.Sprintf("%d labels run past the end of the Body (%d bytes left)", n, left))
		return nil
	}
	var m map[string]string
	if d.maps != nil {
		m = d.maps.Take(slot, int(n))
	} else {
		m = make(map[string]string, n)
	}
	for range n {
		k := d.str(field)
		m[k] = d.str(field)
	}
	if d.err == nil && uint64(len(m)) != n {
		d.fail(field, fmt.Sprintf("%d labels, %d of them distinct", n, len(m)))
	}
	return m
}

// record reads what writer.record writes.
func (d *reader) record(r *flowrecord.Record) {
	d.fields(fields, unsafe.Pointer(r))
	switch d.u8(aggregationPresence) {
	case 0:
		return
	case 1:
	default:
		d.fail(aggregationPresence, fmt.Sprintf("presence byte is %d, want 0 or 1", d.s[d.i-1]))
		return
	}
	r.Aggregation = &flowrecord.Aggregation{}
	d.fields(aggregationFields, unsafe.Pointer(r.Aggregation))
}

// fields reads fs into their offsets from base, each checked against its
// type's range; after an error every field reads zero.
func (d *reader) fields(fs []field, base unsafe.Pointer) {
	for i := range fs {
		f := &fs[i]
		p := unsafe.Add(base, f.ref.Offset)
		switch f.ref.Kind {
		case catalogue.KindUint8:
			*(*uint8)(p) = d.u8(f.name)
		case catalogue.KindEnum:
			*(*uint8)(p) = d.enum(f.name, f.ref.Names)
		case catalogue.KindBool:
			*(*bool)(p) = d.boolean(f.name)
		case catalogue.KindUint16:
			*(*uint16)(p) = d.u16(f.name)
		case catalogue.KindUint32:
			*(*uint32)(p) = d.u32(f.name)
		case catalogue.KindUint64:
			*(*uint64)(p) = d.uvarint(f.name)
		case catalogue.KindTime:
			*(*time.Time)(p) = d.time(f.name)
		case catalogue.KindString:
			*(*string)(p) = d.str(f.name)
		case catalogue.KindAddr:
			*(*netip.Addr)(p) = d.addr(f.name)
		case catalogue.KindLabels:
			*(*catalogue.Labels)(p) = d.labels(f.name, f.ref.LabelsSlot)
		case catalogue.KindBytes16:
			switch n := d.u8(f.name); n {
			case 0:
			case 16:
				if s, ok := d.raw(f.name, 16); ok {
					copy((*catalogue.Bytes16)(p)[:], s)
				}
			default:
				d.fail(f.name, fmt.Sprintf("length %d, want 0 or 16", n))
			}
		}
	}
}

func typeError(name, want string, v pcommon.Value) error {
	return fmt.Errorf("attribute %q: want %s, got %s", name, want, v.Type())
}
