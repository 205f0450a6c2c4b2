//go:build !flowtel_safe

package attrcodec

import (
	"math"
	"reflect"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Decode reads a record's attributes straight from pdata's internal values,
// as the encoder writes them (encoder_fast.go): through the public API, walking a
// Map costs a closure call an entry, and reading a value a type switch over
// pdata's oneof wrappers (Value.Type) and a type assertion (Value.Str,
// Value.Int) where one comparison of the wrapper's type word does. That
// needs pdata's layout, checked once at start (probeReader); when it is not
// the expected one, every read goes through the public API (readFast false).

// keyValueLayout has the layout of pdata's internal.KeyValue, mapLayout that
// of pcommon.Map (a pointer to the entries and one to the state).
type (
	keyValueLayout struct {
		key   string
		value anyValueLayout
		_     int32 // KeyStrindex
	}
	mapLayout struct {
		orig  *[]keyValueLayout
		state unsafe.Pointer
	}
	boolWrapper   struct{ b bool }
	kvlistWrapper struct {
		list *struct{ values []keyValueLayout }
	}
)

// The type words of pdata's wrappers of a string, int, bool and map value,
// as held by an `any`; readFast tells whether they and the layouts above
// are pdata's.
var (
	readStrType, readIntType, readBoolType, readMapType unsafe.Pointer
	readFast                                            bool
)

func init() { readFast = probeReader() }

// probeReader sets the type words of pdata's wrappers, after checking every
// assumption the reads make about pdata's layout, and reports whether they
// all hold and the reads agree with pdata's API (else the type words are
// left nil).
func probeReader() bool {
	vt, mt := reflect.TypeFor[pcommon.Value](), reflect.TypeFor[pcommon.Map]()
	twoPointers := func(t reflect.Type) bool {
		return t.Kind() == reflect.Struct && t.NumField() == 2 && t.Size() == 2*unsafe.Sizeof(uintptr(0)) &&
			t.Field(0).Type.Kind() == reflect.Pointer && t.Field(1).Type.Kind() == reflect.Pointer
	}
	if !twoPointers(vt) || !twoPointers(mt) || vt.Field(1).Type != mt.Field(1).Type {
		return false
	}
	anyValue := vt.Field(0).Type.Elem()
	if anyValue.Kind() != reflect.Struct || anyValue.NumField() != 1 || anyValue.Size() != unsafe.Sizeof(anyValueLayout{}) ||
		anyValue.Field(0).Type.Kind() != reflect.Interface {
		return false
	}
	entries := mt.Field(0).Type.Elem() // []internal.KeyValue
	if !sameLayout(entries, reflect.TypeFor[[]keyValueLayout](), anyValue) {
		return false
	}
	wrapper := func(v pcommon.Value, field reflect.Type) unsafe.Pointer {
		w := (*valueLayout)(unsafe.Pointer(&v)).orig.v
		t := reflect.TypeOf(w)
		if t == nil || t.Kind() != reflect.Pointer || !sameLayout(t.Elem(), field, anyValue) {
			return nil
		}
		return (*ifaceLayout)(unsafe.Pointer(&w)).typ
	}
	m := pcommon.NewValueMap()
	strT := wrapper(pcommon.NewValueStr("probe"), reflect.TypeFor[strWrapper]())
	intT := wrapper(pcommon.NewValueInt(-7), reflect.TypeFor[struct{ i int64 }]())
	boolT := wrapper(pcommon.NewValueBool(true), reflect.TypeFor[boolWrapper]())
	mapT := wrapper(m, reflect.TypeFor[kvlistWrapper]())
	if strT == nil || intT == nil || boolT == nil || mapT == nil {
		return false
	}
	readStrType, readIntType, readBoolType, readMapType = strT, intT, boolT, mapT
	// What pdata's API writes must read back the same.
	m.Map().PutStr("s", "probe")
	m.Map().PutInt("i", -7)
	m.Map().PutBool("b", true)
	m.Map().PutDouble("d", 1.5)
	m.Map().PutEmptyMap("m").PutStr("k", "v")
	readFast = true // for readsAsAPI
	ok := readsAsAPI(m)
	readFast = false
	if !ok {
		readStrType, readIntType, readBoolType, readMapType = nil, nil, nil, nil
	}
	return ok
}

// sameLayout reports whether the pdata type t has the layout of the
// attrcodec type want: the same kinds, sizes and field offsets, recursively
// (anyValue standing for anyValueLayout).
func sameLayout(t, want, anyValue reflect.Type) bool {
	if want == reflect.TypeFor[anyValueLayout]() {
		return t == anyValue
	}
	if t.Kind() != want.Kind() || t.Size() != want.Size() {
		return false
	}
	switch want.Kind() {
	case reflect.Struct:
		if t.NumField() != want.NumField() {
			return false
		}
		for i := range want.NumField() {
			if t.Field(i).Offset != want.Field(i).Offset || !sameLayout(t.Field(i).Type, want.Field(i).Type, anyValue) {
				return false
			}
		}
	case reflect.Pointer, reflect.Slice:
		return sameLayout(t.Elem(), want.Elem(), anyValue)
	}
	return true
}

// readsAsAPI reports whether the reads of v (a map) and of its entries,
// recursively, agree with pdata's API.
func readsAsAPI(v pcommon.Value) bool {
	m, ok := mapOf(v)
	if !ok || v.Type() != pcommon.ValueTypeMap || m.Len() != v.Map().Len() {
		return false
	}
	kvs := entries(m)
	i := 0
	for k, e := range v.Map().All() {
		if i >= len(kvs) || kvs[i].key != k {
			return false
		}
		f := valueAt(&kvs[i], m)
		s, isStr := strOf(f)
		n, isInt := intOf(f)
		b, isBool := boolOf(f)
		_, isMap := mapOf(f)
		switch {
		case isStr != (e.Type() == pcommon.ValueTypeStr) || s != e.Str(),
			isInt != (e.Type() == pcommon.ValueTypeInt) || n != e.Int(),
			isBool != (e.Type() == pcommon.ValueTypeBool) || b != e.Bool(),
			isMap != (e.Type() == pcommon.ValueTypeMap),
			isMap && !readsAsAPI(f):
			return false
		}
		i++
	}
	return i == len(kvs)
}

// entries are m's entries; only when readFast (or probing).
func entries(m pcommon.Map) []keyValueLayout { return *(*mapLayout)(unsafe.Pointer(&m)).orig }

// valueAt is the Value of kv, an entry of m.
func valueAt(kv *keyValueLayout, m pcommon.Map) pcommon.Value {
	v := valueLayout{orig: &kv.value, state: (*mapLayout)(unsafe.Pointer(&m)).state}
	return *(*pcommon.Value)(unsafe.Pointer(&v))
}

// wrapperOf is the type word and the data word of v's wrapper.
func wrapperOf(v pcommon.Value) ifaceLayout { return (*valueLayout)(unsafe.Pointer(&v)).orig.wrapper() }

// wrapper is the type word and the data word of a's wrapper.
func (a *anyValueLayout) wrapper() ifaceLayout { return *(*ifaceLayout)(unsafe.Pointer(&a.v)) }

// strOf is v's string, and whether v is one.
func strOf(v pcommon.Value) (string, bool) {
	if !readFast {
		return v.Str(), v.Type() == pcommon.ValueTypeStr
	}
	if w := wrapperOf(v); w.typ == readStrType {
		return (*strWrapper)(w.data).s, true
	}
	return "", false
}

// intOf is v's int, and whether v is one.
func intOf(v pcommon.Value) (int64, bool) {
	if !readFast {
		return v.Int(), v.Type() == pcommon.ValueTypeInt
	}
	if w := wrapperOf(v); w.typ == readIntType {
		return *(*int64)(w.data), true
	}
	return 0, false
}

// boolOf is v's bool, and whether v is one.
func boolOf(v pcommon.Value) (bool, bool) {
	if !readFast {
		return v.Bool(), v.Type() == pcommon.ValueTypeBool
	}
	if w := wrapperOf(v); w.typ == readBoolType {
		return (*boolWrapper)(w.data).b, true
	}
	return false, false
}

// mapOf is v's map, and whether v is one.
func mapOf(v pcommon.Value) (pcommon.Map, bool) {
	if !readFast {
		return v.Map(), v.Type() == pcommon.ValueTypeMap
	}
	w := wrapperOf(v)
	if w.typ != readMapType {
		return pcommon.Map{}, false
	}
	m := mapLayout{orig: &noEntries, state: (*valueLayout)(unsafe.Pointer(&v)).state}
	if l := (*kvlistWrapper)(w.data).list; l != nil {
		m.orig = &l.values
	}
	return *(*pcommon.Map)(unsafe.Pointer(&m)), true
}

// noEntries are the entries of a map value without its list (only read).
var noEntries []keyValueLayout

// quick decodes v into p (ref.At) when its wrapper is of the field's type and
// the value valid, as the dec* function would, and reports whether it did.
func quick(ref *catalogue.Ref, p catalogue.Loc, v pcommon.Value, sp *spares) bool {
	return readFast && quickWrapper(ref, p, wrapperOf(v), sp)
}

// quickWrapper decodes the value of wrapper w into p when it is of
// the field's type and valid, as the dec* function would (that is, most of
// the time), and reports whether it did; else the dec* function decodes it,
// or names what is wrong.
func quickWrapper(ref *catalogue.Ref, p catalogue.Loc, w ifaceLayout, sp *spares) bool {
	switch ref.Kind {
	case catalogue.KindAddr:
		if w.typ == readStrType && sp != nil {
			if a, ok := sp.addrs.parse((*strWrapper)(w.data).s); ok {
				*p.Addr() = a
				return true
			}
		}
	case catalogue.KindString:
		if w.typ == readStrType {
			*p.String() = (*strWrapper)(w.data).s
			return true
		}
	case catalogue.KindUint64, catalogue.KindUint32, catalogue.KindUint16, catalogue.KindUint8:
		if w.typ != readIntType {
			return false
		}
		switch i := *(*int64)(w.data); {
		case ref.Kind == catalogue.KindUint64 && i >= 0:
			*p.Uint64() = uint64(i)
		case ref.Kind == catalogue.KindUint32 && uint64(i) <= math.MaxUint32:
			*p.Uint32() = uint32(i)
		case ref.Kind == catalogue.KindUint16 && uint64(i) <= math.MaxUint16:
			*p.Uint16() = uint16(i)
		case ref.Kind == catalogue.KindUint8 && uint64(i) <= math.MaxUint8:
			*p.Uint8() = uint8(i)
		default:
			return false
		}
		return true
	case catalogue.KindTime:
		if w.typ == readIntType {
			if ns := *(*int64)(w.data); ns > 0 {
				*p.Time() = time.Unix(0, ns).UTC()
				return true
			}
		}
	case catalogue.KindEnum:
		if w.typ == readStrType {
			if e, ok := flowrecord.ParseEnum[uint8](ref.Names, (*strWrapper)(w.data).s); ok {
				*p.Uint8() = e
				return true
			}
		}
	}
	return false
}

// fast decodes attrs into d's record walking pdata's entries, when readFast;
// done is false when it did not (then the caller walks them through the API).
func (d *attrDecoder) fast(attrs pcommon.Map) (err error, done bool) {
	if !readFast {
		return nil, false
	}
	kvs := entries(attrs)
	// A record this process encoded has the catalogue's own name strings:
	// the next attribute of the catalogue is found without comparing a
	// name's bytes.
	own := false
	if len(kvs) > 0 {
		a := byName[kvs[0].key]
		own = a != nil && unsafe.StringData(a.Name) == unsafe.StringData(kvs[0].key)
	}
	for i := 0; i < len(kvs) && err == nil; i++ {
		kv := &kvs[i]
		var a *attribute
		if n := d.next; own && n < len(attributes) && unsafe.StringData(attributes[n].Name) == unsafe.StringData(kv.key) && len(attributes[n].Name) == len(kv.key) {
			a, d.next = &attributes[n], n+1
		} else {
			a = d.find(kv.key)
		}
		switch {
		case a == nil:
		case a.derive == nil && quickWrapper(&a.ref, a.ref.At(d.r), kv.value.wrapper(), d.s):
			d.decoded(a)
		default:
			err = d.decode(a, kv.key, valueAt(kv, attrs))
		}
	}
	return err, true
}

// eachEntry calls f on each entry of m, until it returns an error.
func eachEntry(m pcommon.Map, f func(k string, v pcommon.Value) error) error {
	if readFast {
		for i, kvs := 0, entries(m); i < len(kvs); i++ {
			if err := f(kvs[i].key, valueAt(&kvs[i], m)); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	// Range, not All: the range-over-func loop's closure escaped (two allocations a map).
	m.Range(func(k string, v pcommon.Value) bool {
		err = f(k, v)
		return err == nil
	})
	return err
}

// sameString is a == b, without comparing bytes when they are the same
// string (Encode writes the catalogue's own name strings).
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// addrSlot is the slot of an addrCache for text s: by where s is in memory.
func addrSlot(s string) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.StringData(s)))) * 0x9e3779b97f4a7c15 >> (64 - addrCacheBits)
}
