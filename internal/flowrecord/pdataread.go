package flowrecord

import (
	"reflect"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Decode reads a record's attributes straight from pdata's internal values,
// as the encoder writes them (encoder.go): through the public API, walking a
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

func init() { readFast = pdataFastPaths && probeReader() }

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
// flowrecord type want: the same kinds, sizes and field offsets, recursively
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
