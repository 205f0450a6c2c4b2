package flowrecord

import (
	"math"
	"net/netip"
	"runtime"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Decode puts most attributes into the Record, and Encode reads them from
// it, without calling their attribute's dec or enc and accessor closures
// (two indirect calls an attribute, most of what decoding a counter cost): a
// store says where the field is, as its offset in the Record or in its
// Aggregation, found once at start from the field's own accessor, and what
// type it has, which decides the dec* function that reads it (the same one
// dec calls) and how Encode writes it (as enc does, encoder.go).
type store struct {
	kind   storeKind
	agg    bool // off is in r.Aggregation (which the store creates, as the accessor does)
	always bool // Encode writes the attribute when the field is zero (counters)
	off    uintptr
	names  []string // of storeEnum
}

// writtenWhenZero is s with always set to always.
func (s store) writtenWhenZero(always bool) store { s.always = always; return s }

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

// at is where s stores in r.
func (s *store) at(r *Record) unsafe.Pointer {
	if s.agg {
		return unsafe.Add(unsafe.Pointer(aggregation(r)), s.off)
	}
	return unsafe.Add(unsafe.Pointer(r), s.off)
}

// put decodes the attribute name, of value v, into p (s.at) by store s,
// with the addresses sp has seen (nil: none).
func (s *store) put(p unsafe.Pointer, name string, v pcommon.Value, sp *spares) error {
	if readFast && s.quick(p, wrapperOf(v), sp) {
		return nil
	}
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

// quick decodes the value of wrapper w (pdataread.go) into p when it is of
// the field's type and valid, as the dec* function would (that is, most of
// the time), and reports whether it did; else the dec* function decodes it,
// or names what is wrong.
func (s *store) quick(p unsafe.Pointer, w ifaceLayout, sp *spares) bool {
	switch s.kind {
	case storeAddr:
		if w.typ == readStrType && sp != nil {
			if a, ok := sp.addrs.parse((*strWrapper)(w.data).s); ok {
				*(*netip.Addr)(p) = a
				return true
			}
		}
	case storeStr:
		if w.typ == readStrType {
			*(*string)(p) = (*strWrapper)(w.data).s
			return true
		}
	case storeU64, storeU32, storeU16, storeU8:
		if w.typ != readIntType {
			return false
		}
		switch i := *(*int64)(w.data); {
		case s.kind == storeU64 && i >= 0:
			*(*uint64)(p) = uint64(i)
		case s.kind == storeU32 && uint64(i) <= math.MaxUint32:
			*(*uint32)(p) = uint32(i)
		case s.kind == storeU16 && uint64(i) <= math.MaxUint16:
			*(*uint16)(p) = uint16(i)
		case s.kind == storeU8 && uint64(i) <= math.MaxUint8:
			*(*uint8)(p) = uint8(i)
		default:
			return false
		}
		return true
	case storeTime:
		if w.typ == readIntType {
			if ns := *(*int64)(w.data); ns > 0 {
				*(*time.Time)(p) = time.Unix(0, ns).UTC()
				return true
			}
		}
	case storeEnum:
		if w.typ == readStrType {
			if e, ok := parseEnum[uint8](s.names, (*strWrapper)(w.data).s); ok {
				*(*uint8)(p) = e
				return true
			}
		}
	}
	return false
}

// An addrCache holds the addresses of the texts a Decoder parsed last, one
// a slot, the slot chosen by where the text is in memory: the records a
// gateway decodes were mostly encoded in the same process, from the
// encoder's cache of address texts (addrtext.go), so the same address comes
// as the same string. A text is compared in full, as another may share its
// slot (a string elsewhere with the same bytes is a miss, no more); for the
// same string that is a pointer comparison. A slot keeps its text alive.
type addrCache [addrCacheSlots]struct {
	text string
	addr netip.Addr
}

const addrCacheBits = 6
const addrCacheSlots = 1 << addrCacheBits

// parse is netip.ParseAddr(s) when it succeeds, and whether it does.
func (c *addrCache) parse(s string) (netip.Addr, bool) {
	e := &c[uint64(uintptr(unsafe.Pointer(unsafe.StringData(s))))*0x9e3779b97f4a7c15>>(64-addrCacheBits)]
	if e.text == s && s != "" {
		return e.addr, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	e.text, e.addr = s, a
	return a, true
}
