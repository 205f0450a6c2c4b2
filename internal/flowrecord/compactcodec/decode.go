package compactcodec

// Decoding: a compact log record back into a Record; errors name the field.

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

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
	return read(lr, r, maps, nil, bodyCopy)
}

// bodyCopy is one copy of a body, as a string a decoded record's strings are
// slices of (one allocation for all of them). AsRaw copies already and
// nothing else holds that copy, so it becomes the string as it is.
func bodyCopy(b pcommon.ByteSlice) string { return ownString(b.AsRaw()) }

// read is Decode, keeping only the fields keep selects (nil: all), the body
// read from the string body makes of it.
func read(lr plog.LogRecord, r *flowrecord.Record, maps LabelMaps, keep *Selection, body func(pcommon.ByteSlice) string) error {
	*r = flowrecord.Record{}
	if err := header(lr, r); err != nil {
		return err
	}
	d := reader{s: body(lr.Body().Bytes()), maps: maps}
	d.record(r, keep)
	return d.end(r)
}

// header checks lr's attributes and Body type as a compact record's and
// reads what lives outside the body into r: Key, End and Observed.
func header(lr plog.LogRecord, r *flowrecord.Record) error {
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
	return nil
}

// end is the error of a body read into r: the reader's first, bytes after the
// last field, or a required address missing.
func (d *reader) end(r *flowrecord.Record) error {
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

// labelCount reads the count of a labels map: ok false for nil (or an
// error), else n, bounded by MaxLabels and by the bytes left.
func (d *reader) labelCount(field string) (n uint64, ok bool) {
	n = d.uvarint(field)
	if n == 0 {
		return 0, false
	}
	n--
	if n > flowrecord.MaxLabels {
		d.fail(field, fmt.Sprintf("%d labels (at most %d)", n, flowrecord.MaxLabels))
		return 0, false
	}
	if left := uint64(len(d.s) - d.i); n > left/2 { // a label takes two bytes at least
		d.fail(field, fmt.Sprintf("%d labels run past the end of the Body (%d bytes left)", n, left))
		return 0, false
	}
	return n, true
}

// distinct fails field when its n labels have fewer distinct keys.
func (d *reader) distinct(field string, n uint64, keys int) {
	if d.err == nil && uint64(keys) != n {
		d.fail(field, fmt.Sprintf("%d labels, %d of them distinct", n, keys))
	}
}

func (d *reader) labels(field string, slot int) map[string]string {
	n, ok := d.labelCount(field)
	if !ok {
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
	d.distinct(field, n, len(m))
	return m
}

// smallLabels is how many labels skipLabels tells apart without a map.
const smallLabels = 16

// skipLabels reads a labels map as labels does, checks it as labels does,
// and keeps nothing: no map for up to smallLabels labels.
func (d *reader) skipLabels(field string) {
	n, ok := d.labelCount(field)
	if !ok {
		return
	}
	var small [smallLabels]string
	var seen map[string]struct{}
	if n > smallLabels {
		seen = make(map[string]struct{}, n)
	}
	keys := 0
	for j := range n {
		k := d.str(field)
		d.str(field)
		if seen != nil {
			seen[k] = struct{}{}
			continue
		}
		if !slices.Contains(small[:j], k) {
			keys++
		}
		small[j] = k
	}
	if seen != nil {
		keys = len(seen)
	}
	d.distinct(field, n, keys)
}

func (d *reader) bytes16(field string) (b catalogue.Bytes16) {
	switch n := d.u8(field); n {
	case 0:
	case 16:
		if s, ok := d.raw(field, 16); ok {
			copy(b[:], s)
		}
	default:
		d.fail(field, fmt.Sprintf("length %d, want 0 or 16", n))
	}
	return b
}

// record reads what writer.record writes: into r the fields keep selects
// (nil: all of them), every other one read and checked, and kept nowhere.
func (d *reader) record(r *flowrecord.Record, keep *Selection) {
	var plain, agg []bool
	if keep != nil {
		plain, agg = keep.plain, keep.agg
	}
	d.fields(fields, r, plain)
	switch d.u8(aggregationPresence) {
	case 0:
		return
	case 1:
	default:
		d.fail(aggregationPresence, fmt.Sprintf("presence byte is %d, want 0 or 1", d.s[d.i-1]))
		return
	}
	if keep == nil {
		r.Aggregation = &flowrecord.Aggregation{}
	}
	d.fields(aggregationFields, r, agg)
}

// fields reads fs, each checked against its type's range, into r (only
// those keep selects, when it is not nil); after an error every field reads
// zero.
func (d *reader) fields(fs []field, r *flowrecord.Record, keep []bool) {
	for i := range fs {
		f := &fs[i]
		if keep != nil && !keep[i] {
			d.skip(f)
			continue
		}
		p := f.ref.At(r)
		switch f.ref.Kind {
		case catalogue.KindUint8:
			*p.Uint8() = d.u8(f.name)
		case catalogue.KindEnum:
			*p.Uint8() = d.enum(f.name, f.ref.Names)
		case catalogue.KindBool:
			*p.Bool() = d.boolean(f.name)
		case catalogue.KindUint16:
			*p.Uint16() = d.u16(f.name)
		case catalogue.KindUint32:
			*p.Uint32() = d.u32(f.name)
		case catalogue.KindUint64:
			*p.Uint64() = d.uvarint(f.name)
		case catalogue.KindTime:
			*p.Time() = d.time(f.name)
		case catalogue.KindString:
			*p.String() = d.str(f.name)
		case catalogue.KindAddr:
			*p.Addr() = d.addr(f.name)
		case catalogue.KindLabels:
			*p.Labels() = d.labels(f.name, f.ref.LabelsSlot)
		case catalogue.KindBytes16:
			*p.Bytes16() = d.bytes16(f.name)
		}
	}
}

// skip reads f and checks it as fields does, and keeps nothing of it.
func (d *reader) skip(f *field) {
	switch f.ref.Kind {
	case catalogue.KindLabels:
		d.skipLabels(f.name)
	case catalogue.KindTime, catalogue.KindUint64:
		d.uvarint(f.name) // any value: a time is any zigzag varint
	case catalogue.KindString:
		d.str(f.name)
	case catalogue.KindUint8:
		d.u8(f.name)
	case catalogue.KindEnum:
		d.enum(f.name, f.ref.Names)
	case catalogue.KindBool:
		d.boolean(f.name)
	case catalogue.KindUint16:
		d.u16(f.name)
	case catalogue.KindUint32:
		d.u32(f.name)
	case catalogue.KindAddr:
		d.addr(f.name)
	case catalogue.KindBytes16:
		d.bytes16(f.name)
	}
}

func typeError(name, want string, v pcommon.Value) error {
	return fmt.Errorf("attribute %q: want %s, got %s", name, want, v.Type())
}
