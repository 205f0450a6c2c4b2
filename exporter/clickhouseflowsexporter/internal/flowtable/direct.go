package flowtable

import (
	"net/netip"
	"reflect"
	"time"
	"unsafe"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// offsets are, per column of Columns, the offset in a flowrecord.Record of
// the field its accessor reads, -1 where the accessor is not found to read
// one field of the Record itself (enumeration names, label sets, fields
// behind a pointer, computed values). A Block reads the others directly,
// without calling the accessor (two indirect calls) for every value.
var offsets = columnOffsets()

func columnOffsets() []int {
	out := make([]int, len(Columns))
	for i, c := range Columns {
		v := &c.value
		switch c.kind {
		case kindTime:
			out[i] = probe(v.Time, func(n int) time.Time { return time.Unix(int64(1e9+n), 0).UTC() })
		case kindUInt8:
			out[i] = probe(v.Uint8, func(n int) uint8 { return uint8(n) })
		case kindUInt16:
			out[i] = probe(v.Uint16, func(n int) uint16 { return uint16(n) })
		case kindUInt64:
			out[i] = probe(v.Uint64, func(n int) uint64 { return uint64(n) << 33 })
		case kindString:
			out[i] = probe(v.String, func(n int) string { return "probe-" + string(rune('A'+n%26)) + string(rune('A'+n/26)) })
		case kindAddr:
			out[i] = probe(v.Addr, func(n int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)}) })
		default:
			out[i] = -1
		}
	}
	return out
}

// probe finds the field of type V (or, for a basic type, of V's kind) that
// get reads: in a Record whose every such field holds a distinct value,
// get returns one field's value; it returns that value too when only that
// field is set, and the zero value when every field but that one is set.
// It returns the field's offset, -1 when get passes not all three.
func probe[V comparable](get func(*flowrecord.Record) V, distinct func(int) V) int {
	fields := fieldsOf(reflect.TypeFor[V](), reflect.TypeFor[flowrecord.Record](), 0, nil)
	set := func(r *flowrecord.Record, skip, only int) {
		for n, off := range fields {
			if (only < 0 || n == only) && n != skip {
				*(*V)(unsafe.Add(unsafe.Pointer(r), off)) = distinct(n + 1)
			}
		}
	}
	var all flowrecord.Record
	set(&all, -1, -1)
	got, found := get(&all), -1
	for n := range fields {
		if distinct(n+1) == got {
			if found >= 0 {
				return -1
			}
			found = n
		}
	}
	if found < 0 {
		return -1
	}
	var one, others flowrecord.Record
	set(&one, -1, found)
	set(&others, found, -1)
	var zero V
	if get(&one) != got || get(&others) != zero {
		return -1
	}
	return int(fields[found])
}

// fieldsOf appends the offsets (from base) of the fields of type v, or of
// v's kind when v is a basic type, in struct type t and the structs it
// holds (not behind pointers).
func fieldsOf(v, t reflect.Type, base uintptr, out []uintptr) []uintptr {
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Type == v || f.Type.Kind() == v.Kind() && v.PkgPath() == "" && v.Kind() != reflect.Struct:
			out = append(out, base+f.Offset)
		case f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath():
			out = fieldsOf(v, f.Type, base+f.Offset, out)
		}
	}
	return out
}
