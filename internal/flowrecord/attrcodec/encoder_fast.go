//go:build !flowtel_safe

package attrcodec

import (
	"reflect"
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/xpdata"
)

// An encoder appends the attributes of one record.
//
// pdata holds a string or int attribute value behind a wrapper object of its
// own (internal.AnyValue_StringValue, _IntValue): Value.SetStr and SetInt
// allocate one for every value, about ninety for an aggregated record, which
// made up a third of Encode's instructions. The encoder instead carves the
// wrappers of a record out of two arrays allocated once a record (slabs),
// with the same memory layout as pdata's wrappers (shared with the records
// encoded before and after it), and points the values at them. That needs pdata's layout, which is checked once at start (see
// probeWrappers); when it is not what the encoder expects, it uses SetStr and
// SetInt. The values are ordinary pdata values afterwards: readers, copies,
// Set* and pdata's pools see wrappers of the right type (a Set* replaces a
// value's wrapper, it never writes into the old one); a value moved elsewhere
// keeps its slab alive (a dozen records' wrappers), no more.
type encoder struct {
	b    xpdata.MapBuilder
	strs []strWrapper
	ints []int64 // the layout of pdata's int wrapper is one int64
	// kvs is the slab the records' attribute arrays are carved from (when
	// pairsOffset was found): one allocation for the arrays of a few dozen
	// records instead of one array of ~3 KB each, which took the allocator
	// back to its central lists every other record.
	kvs []keyValueLayout // the layout of pdata's internal.KeyValue (read_fast.go)
	// labelKVs is what is left of the part of kvs newEncoder set aside for
	// the entries of the record's labels maps, labelsSetAside long.
	labelKVs       []keyValueLayout
	labelsSetAside int
}

// strWrapper has the layout of pdata's string wrapper.
type strWrapper struct{ s string }

// The layouts of pdata's internal.AnyValue and pcommon.Value (a pointer to
// the AnyValue and one to the state).
type (
	anyValueLayout struct{ v any }
	valueLayout    struct {
		orig  *anyValueLayout
		state unsafe.Pointer
	}
	ifaceLayout struct{ typ, data unsafe.Pointer }
)

// The type words of pdata's string and int wrappers (as pointers held by an
// `any`); nil when the layout is not the expected one.
var strWrapperType, intWrapperType = probeWrappers()

// pairsOffset is where a MapBuilder holds its attribute array, -1 when its
// layout is not the expected one (then the builder allocates each array).
var pairsOffset = probePairs()

// probePairs returns the offset of xpdata.MapBuilder's array of key-value
// pairs after checking that the pairs have the layout of keyValueLayout and
// that a builder given an array carved from a slab writes into it.
func probePairs() uintptr {
	bt := reflect.TypeFor[xpdata.MapBuilder]()
	if bt.Kind() != reflect.Struct || strWrapperType == nil {
		return ^uintptr(0)
	}
	for i := range bt.NumField() {
		f := bt.Field(i)
		if f.Type.Kind() != reflect.Slice {
			continue
		}
		kv := f.Type.Elem()
		if kv.Kind() != reflect.Struct || kv.Size() != unsafe.Sizeof(keyValueLayout{}) || kv.NumField() < 2 ||
			kv.Field(0).Type.Kind() != reflect.String || kv.Field(1).Offset != unsafe.Offsetof(keyValueLayout{}.value) ||
			kv.Field(1).Type.Size() != unsafe.Sizeof(anyValueLayout{}) {
			return ^uintptr(0)
		}
		// A builder on a carved array appends into it, and the map it fills
		// reads back what was written.
		slab := make([]keyValueLayout, 3)
		var b xpdata.MapBuilder
		*(*[]keyValueLayout)(unsafe.Add(unsafe.Pointer(&b), f.Offset)) = slab[1:1:2]
		set(b.AppendEmpty("probe"), strWrapperType, unsafe.Pointer(&strWrapper{s: "value"}))
		m := pcommon.NewMap()
		b.UnsafeIntoMap(m)
		v, ok := m.Get("probe")
		if slab[1].key != "probe" || !ok || v.Str() != "value" || m.Len() != 1 || slab[0].key != "" || slab[2].key != "" {
			return ^uintptr(0)
		}
		return f.Offset
	}
	return ^uintptr(0)
}

const slabKVs = 4096 // key-value pairs, 128 KB: the arrays of 40 aggregated records or so

// pairs is where e's builder holds its array (pairsOffset found).
func (e *encoder) pairs() *[]keyValueLayout {
	return (*[]keyValueLayout)(unsafe.Add(unsafe.Pointer(&e.b), pairsOffset))
}

// probeWrappers returns the type words of pdata's string and int wrappers,
// after checking every assumption the encoder makes about pdata's layout;
// nils if one does not hold.
func probeWrappers() (strT, intT unsafe.Pointer) {
	vt := reflect.TypeFor[pcommon.Value]()
	if vt.Kind() != reflect.Struct || vt.NumField() != 2 || vt.Size() != unsafe.Sizeof(valueLayout{}) ||
		vt.Field(0).Type.Kind() != reflect.Pointer || vt.Field(1).Type.Kind() != reflect.Pointer {
		return nil, nil
	}
	at := vt.Field(0).Type.Elem() // internal.AnyValue
	if at.Kind() != reflect.Struct || at.NumField() != 1 || at.Size() != unsafe.Sizeof(anyValueLayout{}) ||
		at.Field(0).Type.Kind() != reflect.Interface {
		return nil, nil
	}
	wrapper := func(v pcommon.Value, kind reflect.Kind, size uintptr) unsafe.Pointer {
		w := (*valueLayout)(unsafe.Pointer(&v)).orig.v
		t := reflect.TypeOf(w)
		if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct || t.Elem().NumField() != 1 ||
			t.Elem().Field(0).Type.Kind() != kind || t.Elem().Size() != size {
			return nil
		}
		return (*ifaceLayout)(unsafe.Pointer(&w)).typ
	}
	strT = wrapper(pcommon.NewValueStr("probe"), reflect.String, unsafe.Sizeof(strWrapper{}))
	intT = wrapper(pcommon.NewValueInt(-7), reflect.Int64, unsafe.Sizeof(int64(0)))
	if strT == nil || intT == nil {
		return nil, nil
	}
	// What the encoder writes must read back through pdata's own API.
	var b xpdata.MapBuilder
	set(b.AppendEmpty("s"), strT, unsafe.Pointer(&strWrapper{s: "probe"}))
	set(b.AppendEmpty("i"), intT, unsafe.Pointer(new(int64(-7))))
	m := pcommon.NewMap()
	b.UnsafeIntoMap(m)
	s, _ := m.Get("s")
	i, _ := m.Get("i")
	if s.Type() != pcommon.ValueTypeStr || s.Str() != "probe" || i.Type() != pcommon.ValueTypeInt || i.Int() != -7 {
		return nil, nil
	}
	return strT, intT
}

// set points v, fresh from a MapBuilder, at the wrapper w of type typ.
func set(v pcommon.Value, typ, w unsafe.Pointer) {
	var x any
	*(*ifaceLayout)(unsafe.Pointer(&x)) = ifaceLayout{typ: typ, data: w}
	(*valueLayout)(unsafe.Pointer(&v)).orig.v = x
}

// The encoders keep what is left of the slabs of the records they wrote:
// the next record takes its wrappers from them, so no slab is left mostly
// unused (a record does not know how many of its attributes are zero, hence
// omitted, until it is written). A slab holds the wrappers of a dozen
// records or so.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

const slabStrs, slabInts = 1024, 512

// newEncoder returns an encoder with room for attrs attributes, labels
// labels (the entries of the labels maps), strs string values and ints int
// values.
func newEncoder(attrs, labels, strs, ints int) *encoder {
	e := encoders.Get().(*encoder)
	if pairsOffset == ^uintptr(0) {
		e.b.EnsureCapacity(attrs)
	} else {
		if cap(e.kvs)-len(e.kvs) < labels+attrs {
			e.kvs = make([]keyValueLayout, 0, max(labels+attrs, slabKVs))
		}
		// The labels maps' entries first (labelsMap carves them), then the
		// record's array, with room for attrs pairs; finish gives the map
		// only what was written, and the rest goes to the next record.
		free := e.kvs[len(e.kvs):len(e.kvs):cap(e.kvs)]
		e.labelKVs, e.labelsSetAside = free[:labels:labels], labels
		*e.pairs() = free[labels : labels : labels+attrs]
	}
	if strWrapperType == nil {
		return e
	}
	// A new slab, never a reallocation: values point into the old one.
	if cap(e.strs)-len(e.strs) < strs {
		e.strs = make([]strWrapper, 0, max(strs, slabStrs))
	}
	if cap(e.ints)-len(e.ints) < ints {
		e.ints = make([]int64, 0, max(ints, slabInts))
	}
	return e
}

// finish moves the attributes into m, replacing its previous ones, and
// gives e back.
func (e *encoder) finish(m pcommon.Map) {
	if pairsOffset != ^uintptr(0) {
		// The map's array ends where its pairs do: a pair the map appends
		// later goes to a new array, never into the next record's.
		p := e.pairs()
		n := len(*p)
		*p = (*p)[:n:n]
		e.kvs = e.kvs[:len(e.kvs)+e.labelsSetAside+n]
		e.labelKVs, e.labelsSetAside = nil, 0
	}
	e.b.UnsafeIntoMap(m)
	encoders.Put(e)
}

// setStr sets v, fresh from a MapBuilder, to the string s.
func (e *encoder) setStr(v pcommon.Value, s string) {
	if strWrapperType == nil || len(e.strs) == cap(e.strs) {
		v.SetStr(s)
		return
	}
	e.strs = append(e.strs, strWrapper{s: s})
	set(v, strWrapperType, unsafe.Pointer(&e.strs[len(e.strs)-1]))
}

// setInt sets v, fresh from a MapBuilder, to the integer i.
func (e *encoder) setInt(v pcommon.Value, i int64) {
	if intWrapperType == nil || len(e.ints) == cap(e.ints) {
		v.SetInt(i)
		return
	}
	e.ints = append(e.ints, i)
	set(v, intWrapperType, unsafe.Pointer(&e.ints[len(e.ints)-1]))
}

// str and int append an attribute: into the record's carved array when
// direct, else through the builder.
func (e *encoder) str(name, s string) {
	if e.direct() {
		e.pairStr(name, s)
		return
	}
	e.setStr(e.b.AppendEmpty(name), s)
}

func (e *encoder) int(name string, i int64) {
	if e.direct() {
		e.pairInt(name, i)
		return
	}
	e.setInt(e.b.AppendEmpty(name), i)
}

// direct reports whether e writes pairs into the record's carved array
// itself (pdata's layouts as probed): a MapBuilder's AppendEmpty copies a
// whole pair in (a bulk write barrier while the GC marks) and wraps its
// value, and pdata's setters allocate.
func (e *encoder) direct() bool {
	return writePairs && pairsOffset != ^uintptr(0) && intWrapperType != nil
}

// writePairs is turned off by tests comparing with the builder's path.
var writePairs = true

// next is the next pair of the record's array, keyed name, or nil when the
// array is full or the caller's wrapper slab (used of capacity taken) has
// no room for wrappers more: never, as newEncoder sizes them; then the
// caller appends through the builder.
func (e *encoder) next(name string, wrappers, used, capacity int) *keyValueLayout {
	p := e.pairs()
	n := len(*p)
	if n == cap(*p) || used+wrappers > capacity {
		return nil
	}
	*p = (*p)[:n+1]
	kv := &(*p)[n] // zero: carved from a fresh slab, never written before
	kv.key = name
	return kv
}

// pairStr and pairInt append an attribute into the carved array (only when direct).
func (e *encoder) pairStr(name, s string) {
	kv := e.next(name, 1, len(e.strs), cap(e.strs))
	if kv == nil {
		e.setStr(e.b.AppendEmpty(name), s)
		return
	}
	e.strs = append(e.strs, strWrapper{s: s})
	*(*ifaceLayout)(unsafe.Pointer(&kv.value.v)) = ifaceLayout{typ: strWrapperType, data: unsafe.Pointer(&e.strs[len(e.strs)-1])}
}

func (e *encoder) pairInt(name string, i int64) {
	kv := e.next(name, 1, len(e.ints), cap(e.ints))
	if kv == nil {
		e.setInt(e.b.AppendEmpty(name), i)
		return
	}
	e.ints = append(e.ints, i)
	*(*ifaceLayout)(unsafe.Pointer(&kv.value.v)) = ifaceLayout{typ: intWrapperType, data: unsafe.Pointer(&e.ints[len(e.ints)-1])}
}

// A labels map written directly: pdata's map value wrapper and its list,
// one allocation (SetEmptyMap makes two, the builder a third for the array).
type labelsValue struct {
	w    kvlistWrapper
	list struct{ values []keyValueLayout }
}

// labelsMap appends the attribute name holding labels, a map of strings.
func (e *encoder) labelsMap(name string, labels map[string]string) {
	var kv *keyValueLayout
	if e.direct() && readFast && len(labels) <= len(e.labelKVs) {
		kv = e.next(name, len(labels), len(e.strs), cap(e.strs))
	}
	if kv == nil {
		lm := e.b.AppendEmpty(name).SetEmptyMap()
		var lb xpdata.MapBuilder // a Go map's keys are distinct
		lb.EnsureCapacity(len(labels))
		for k, v := range labels {
			e.setStr(lb.AppendEmpty(k), v) // Encode took room for every label
		}
		lb.UnsafeIntoMap(lm)
		return
	}
	entries := e.labelKVs[:0:len(labels)] // capped: an entry the map gets later goes elsewhere
	e.labelKVs = e.labelKVs[len(labels):]
	for k, v := range labels {
		entries = append(entries, keyValueLayout{key: k})
		e.strs = append(e.strs, strWrapper{s: v})
		*(*ifaceLayout)(unsafe.Pointer(&entries[len(entries)-1].value.v)) = ifaceLayout{typ: strWrapperType, data: unsafe.Pointer(&e.strs[len(e.strs)-1])}
	}
	lv := &labelsValue{}
	lv.list.values = entries
	lv.w.list = &lv.list
	*(*ifaceLayout)(unsafe.Pointer(&kv.value.v)) = ifaceLayout{typ: readMapType, data: unsafe.Pointer(&lv.w)}
}
