package flowrecord

import (
	"net/netip"
	"runtime"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Decode puts most attributes into the Record without calling their
// attribute's dec and accessor closures (two indirect calls an attribute,
// most of what decoding a counter cost): a store says where the field is,
// as its offset in the Record or in its Aggregation, found once at start
// from the field's own accessor, and what type it has, which decides the
// dec* function that reads it (the same one dec calls).
type store struct {
	kind  storeKind
	agg   bool // off is in r.Aggregation (which the store creates, as the accessor does)
	off   uintptr
	names []string // of storeEnum
}

type storeKind uint8

// storeFunc (the zero store) decodes through the attribute's dec; the others
// name the type of the field at off.
const (
	storeFunc storeKind = iota
	storeStr
	storeBool
	storeU8
	storeU16
	storeU32
	storeU64
	storeTime
	storeAddr
	storeEnum // uint8
)

// storeOf is the store of the field get points to, of kind k (the caller
// passes the kind of T); storeFunc when it is not a field of the Record or
// of its Aggregation.
func storeOf[T any](k storeKind, get func(*Record) *T) store {
	r := &Record{Aggregation: &Aggregation{}}
	p, size := uintptr(unsafe.Pointer(get(r))), unsafe.Sizeof(*new(T))
	within := func(base unsafe.Pointer, n uintptr) (uintptr, bool) {
		b := uintptr(base)
		return p - b, p >= b && p+size <= b+n
	}
	s := store{kind: k}
	var ok bool
	if s.off, ok = within(unsafe.Pointer(r), unsafe.Sizeof(*r)); !ok {
		s.agg = true
		if s.off, ok = within(unsafe.Pointer(r.Aggregation), unsafe.Sizeof(*r.Aggregation)); !ok {
			s = store{}
		}
	}
	runtime.KeepAlive(r)
	return s
}

// put decodes the attribute name, of value v, into r by store s.
func (s *store) put(r *Record, name string, v pcommon.Value) error {
	p := unsafe.Pointer(r)
	if s.agg {
		p = unsafe.Pointer(aggregation(r))
	}
	p = unsafe.Add(p, s.off)
	switch s.kind {
	case storeStr:
		return decStr(name, v, (*string)(p))
	case storeBool:
		return decBool(name, v, (*bool)(p))
	case storeU8:
		return decUint(name, v, (*uint8)(p))
	case storeU16:
		return decUint(name, v, (*uint16)(p))
	case storeU32:
		return decUint(name, v, (*uint32)(p))
	case storeU64:
		return decUint(name, v, (*uint64)(p))
	case storeTime:
		return decTime(name, v, (*time.Time)(p))
	case storeAddr:
		return decAddr(name, v, (*netip.Addr)(p))
	case storeEnum:
		return decEnum(name, s.names, v, (*uint8)(p))
	}
	panic("flowrecord: store of kind storeFunc")
}
