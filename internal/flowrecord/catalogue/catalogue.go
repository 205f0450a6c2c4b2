package catalogue

import (
	"cmp"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Record is the model the catalogue describes.
type Record = flowrecord.Record

// Field is one entry of the catalogue.
type Field struct {
	// Attribute is the LogRecord attribute; "" for a value carried elsewhere
	// (the LogRecord Timestamp, the resource), see Doc.
	Attribute string
	// AttrType is the attribute's type: string, int, bool, map<string,string>.
	AttrType string
	Doc      string
	// Derived attributes are written for readers and ignored when decoding.
	Derived bool
	// Aggregation fields belong to Record.Aggregation; their attributes are
	// written only when it is set, and their Value reads zero when it is nil.
	Aggregation bool
	// Value reads the field from a decoded Record.
	Value Value
	// IPFIX lists the Antrea IPFIX IEs carrying the field.
	IPFIX []IE
	// ClickHouse lists the columns of the flows table carrying the field.
	ClickHouse []Column

	// Ref is where the field is in a Record, for the decoders; the zero Ref
	// for a field that is not decoded (derived, or carried outside the
	// attributes: the LogRecord Timestamp, the resource).
	Ref Ref
	// WrittenWhenZero: the attribute form writes the field when it is zero
	// (counters a reader expects to find); other zero values are omitted.
	WrittenWhenZero bool

	value func(agg bool) Value
	// name is the Name of a field without an attribute.
	name string
	// wire is the Ref its IEs and columns carry: Ref, or for a field
	// outside the attributes, where it is all the same.
	wire Ref
}

// Name names the field among the catalogue's: its attribute, or for a field
// carried outside the attributes a name of its own in parentheses
// ("(end)", "(cluster_uid)"). Wires mapping fields outside the catalogue's
// own lists (Antrea's protobuf Flow) key their mappings by it.
func (f *Field) Name() string {
	if f.Attribute != "" {
		return f.Attribute
	}
	return f.name
}

// WireRef is where the field is in a Record for the wires: its Ref, or for
// a field carried outside the attributes (the end, the cluster UID) where it
// is all the same; the zero Ref for a derived field.
func (f *Field) WireRef() Ref { return f.wire }

// Ref is where a field lives in a Record: its Kind (KindBytes16 for the
// conntrack labels, whatever its Value reads), its offset in the Record, or
// in its Aggregation, for an enum its values' names, and for a labels map
// whose it is (0 the source's, 1 the destination's). The codecs read and
// write the field through it without a call a field.
type Ref struct {
	Kind        Kind
	Offset      uintptr
	Aggregation bool // Offset is in r.Aggregation
	Names       []string
	LabelsSlot  int
}

// At is where the field is in r, creating r.Aggregation for an aggregation
// field when r has none (for decoding; Value reads without creating it, and
// a writer reads an aggregation field only from a Record with Aggregation).
// It is the one place flowtel locates a Record field by its offset: every
// wire reads and writes fields through it (or through Value).
func (f *Ref) At(r *Record) Loc {
	if f.Aggregation {
		return Loc{unsafe.Add(unsafe.Pointer(aggregation(r)), f.Offset)}
	}
	return Loc{unsafe.Add(unsafe.Pointer(r), f.Offset)}
}

// Loc is a field of a Record located by a Ref: its method of the Ref's Kind
// is the field (Uint8 for a KindEnum; the others' results are not the
// field). The zero Loc is no field.
type Loc struct{ p unsafe.Pointer }

// The field at l, by its kind.

func (l Loc) Uint8() *uint8     { return (*uint8)(l.p) }
func (l Loc) Uint16() *uint16   { return (*uint16)(l.p) }
func (l Loc) Uint32() *uint32   { return (*uint32)(l.p) }
func (l Loc) Uint64() *uint64   { return (*uint64)(l.p) }
func (l Loc) Bool() *bool       { return (*bool)(l.p) }
func (l Loc) Time() *time.Time  { return (*time.Time)(l.p) }
func (l Loc) Addr() *netip.Addr { return (*netip.Addr)(l.p) }
func (l Loc) String() *string   { return (*string)(l.p) }
func (l Loc) Labels() *Labels   { return (*Labels)(l.p) }
func (l Loc) Bytes16() *Bytes16 { return (*Bytes16)(l.p) }

// Reader reads a value of Go type V from a Record, record after record (a
// writer filling one column or IE): directly where its Ref locates it, at
// no call's cost, else through its accessor (a Value's function).
type Reader[V any] struct {
	off int // of the field in the Record; -1: get reads
	get func(*Record) V
}

// NewReader is the Reader of the value get reads, directly when ref locates
// a field of type V of the Record itself (an enumeration's is a uint8): not
// for the zero Ref or an aggregation field (get reads zero for a Record
// without Aggregation).
func NewReader[V any](ref Ref, get func(*Record) V) Reader[V] {
	k, ok := goKinds[reflect.TypeFor[V]()]
	if ok && !ref.Aggregation && (ref.Kind == k || k == KindUint8 && ref.Kind == KindEnum) {
		return Reader[V]{off: int(ref.Offset), get: get}
	}
	return Reader[V]{off: -1, get: get}
}

// Get is the value in r.
func (d *Reader[V]) Get(r *Record) V {
	if d.off >= 0 {
		return *(*V)(unsafe.Add(unsafe.Pointer(r), d.off))
	}
	return d.get(r)
}

// Direct says whether the Reader reads its field directly.
func (d *Reader[V]) Direct() bool { return d.off >= 0 }

// goKinds are the kinds of the Go types of the fields a Ref locates.
var goKinds = map[reflect.Type]Kind{
	reflect.TypeFor[uint8](): KindUint8, reflect.TypeFor[uint16](): KindUint16, reflect.TypeFor[uint32](): KindUint32,
	reflect.TypeFor[uint64](): KindUint64, reflect.TypeFor[bool](): KindBool, reflect.TypeFor[time.Time](): KindTime,
	reflect.TypeFor[netip.Addr](): KindAddr, reflect.TypeFor[string](): KindString, reflect.TypeFor[Labels](): KindLabels,
	reflect.TypeFor[Bytes16](): KindBytes16,
}

// Pointer types of the kinds, for At's result.
type (
	// Labels is the type of a KindLabels field.
	Labels = map[string]string
	// Bytes16 is the type of a KindBytes16 field.
	Bytes16 = [16]byte
)

// refOf is the Ref of the field get points to, of kind k (the caller passes
// the kind of T): a field of the Record or of its Aggregation, else a
// mistake in the catalogue.
func refOf[T any](k Kind, get func(*Record) *T) Ref {
	r := &Record{Aggregation: &flowrecord.Aggregation{}}
	p, size := uintptr(unsafe.Pointer(get(r))), unsafe.Sizeof(*new(T))
	within := func(base unsafe.Pointer, n uintptr) (uintptr, bool) {
		b := uintptr(base)
		return p - b, p >= b && p+size <= b+n
	}
	ref := Ref{Kind: k}
	var ok bool
	if ref.Offset, ok = within(unsafe.Pointer(r), unsafe.Sizeof(*r)); !ok {
		ref.Aggregation = true
		if ref.Offset, ok = within(unsafe.Pointer(r.Aggregation), unsafe.Sizeof(*r.Aggregation)); !ok {
			panic("catalogue: an accessor points outside the Record and its Aggregation")
		}
	}
	return ref
}

// Kind is the Go type of a Value, which decides how each wire writes it.
type Kind uint8

// The kinds of Value. Enum is a uint8 enumeration read through Uint8, with
// Names for its textual form.
const (
	KindNone Kind = iota
	KindUint8
	KindUint16
	KindUint32
	KindUint64
	KindEnum
	KindBool
	KindTime
	KindAddr
	KindString
	KindLabels
	KindBytes16 // only a Ref's: the conntrack labels
)

var kindNames = []string{"none", "uint8", "uint16", "uint32", "uint64", "enum", "bool", "time", "address", "string", "labels", "bytes16"}

func (k Kind) String() string { return flowrecord.EnumName(kindNames, k) }

// Value is a typed accessor on a decoded Record: the function of its Kind is set.
type Value struct {
	Kind   Kind
	Uint8  func(*Record) uint8 // KindUint8, KindEnum
	Uint16 func(*Record) uint16
	Uint32 func(*Record) uint32
	Uint64 func(*Record) uint64
	Bool   func(*Record) bool
	Time   func(*Record) time.Time
	Addr   func(*Record) netip.Addr
	String func(*Record) string
	Labels func(*Record) map[string]string
	// Names are an Enum's values' names, indexed by value ("" for the zero value).
	Names []string
}

// Name is the textual form of an Enum value: its name, "" for the zero value.
func (v *Value) Name(r *Record) string { return flowrecord.EnumName(v.Names, v.Uint8(r)) }

// Enterprise numbers of the IPFIX IEs.
const (
	EnterpriseIANA        uint32 = 0
	EnterpriseIANAReverse uint32 = 29305 // RFC 5103 reverse IEs
	EnterpriseAntrea      uint32 = 56506
)

// IEType is an IPFIX abstract data type, numbered as in the IANA registry
// (RFC 7012), as go-ipfix numbers its IEDataType.
type IEType uint8

// The IE types the catalogue uses.
const (
	OctetArray      IEType = 0
	Unsigned8       IEType = 1
	Unsigned16      IEType = 2
	Unsigned32      IEType = 3
	Unsigned64      IEType = 4
	String          IEType = 13
	DateTimeSeconds IEType = 14
	IPv4Address     IEType = 18
	IPv6Address     IEType = 19
)

func (t IEType) String() string {
	switch t {
	case OctetArray:
		return "octetArray"
	case Unsigned8:
		return "unsigned8"
	case Unsigned16:
		return "unsigned16"
	case Unsigned32:
		return "unsigned32"
	case Unsigned64:
		return "unsigned64"
	case String:
		return "string"
	case DateTimeSeconds:
		return "dateTimeSeconds"
	case IPv4Address:
		return "ipv4Address"
	case IPv6Address:
		return "ipv6Address"
	}
	return fmt.Sprintf("IEType(%d)", uint8(t))
}

// IE is an IPFIX information element; the layouts check it against the
// go-ipfix registry when they are built.
type IE struct {
	Name       string
	Enterprise uint32
	ID         uint16
	Type       IEType
	// Value is what the IE carries: its field's Value unless the IE has its
	// own (a wire value other than the Go one, one family of an address).
	Value Value
	// Ref is where its field is in a Record: the field's, also for a field
	// carried outside the attributes (the end time, the cluster UID); the
	// zero Ref for an IE with a Value of its own.
	Ref Ref
	// Inbound IEs are read from Antrea's agents and never written: the
	// exporters' layouts and IPFIXElements leave them out (the agents'
	// string policy UIDs, where the exporters write 16-byte UUIDs).
	Inbound bool
	// Fallback IEs are read only while their field is unset: a deprecated
	// IE carrying what another IE of the field carries (Antrea's
	// destinationClusterIPv4/6, which older agents send alone).
	Fallback bool
}

// ColumnType is the ClickHouse type of a column: only types every ClickHouse
// from 18.16 on accepts.
type ColumnType uint8

// The column types.
const (
	DateTime ColumnType = iota + 1
	UInt8
	UInt16
	UInt64
	CHString
)

func (t ColumnType) String() string {
	return [...]string{"", "DateTime", "UInt8", "UInt16", "UInt64", "String"}[t]
}

// Column is a column of the flows table.
type Column struct {
	Name string
	Type ColumnType
	// Antrea is the column's position (1-based) among the 51 columns of
	// Antrea's flows table the exporter writes, in Antrea's order; 0 for
	// flowtel's own columns, which follow in catalogue order.
	Antrea int
	// Doc says what the column holds: its field's Doc, and what is
	// particular to the column.
	Doc string
	// Attribute is the attribute of the field it carries ("" for a field without one).
	Attribute string
	// Value is what the column holds: its field's Value unless it has its own.
	Value Value
	// Ref is where its field is in a Record, as an IE's Ref: the zero Ref
	// for a column with a Value of its own.
	Ref Ref
}

// Fields returns the catalogue in attribute order (the order Encode writes).
func Fields() []Field { return slices.Clone(catalogue) }

// IPFIXElements returns every IE of the catalogue the exporters may write
// (not the Inbound ones) by name.
func IPFIXElements() map[string]IE {
	out := make(map[string]IE)
	for _, f := range catalogue {
		for _, ie := range f.IPFIX {
			if !ie.Inbound {
				out[ie.Name] = ie
			}
		}
	}
	return out
}

// ClickHouseColumns returns the columns of the flows table in table order:
// Antrea's, by their position, then flowtel's.
func ClickHouseColumns() []Column {
	var out []Column
	for _, f := range catalogue {
		out = append(out, f.ClickHouse...)
	}
	slices.SortStableFunc(out, func(a, b Column) int {
		switch {
		case a.Antrea == 0 && b.Antrea == 0:
			return 0
		case a.Antrea == 0:
			return 1
		case b.Antrea == 0:
			return -1
		}
		return cmp.Compare(a.Antrea, b.Antrea)
	})
	return out
}

// Wire declarations, chained on a Field in fields.go.

func (f Field) doc(d string) Field { f.Doc = d; return f }
func (f Field) agg() Field         { f.Aggregation = true; return f }

// ie adds IEs carrying the field's value.
func (f Field) ie(ies ...IE) Field { f.IPFIX = append(f.IPFIX, ies...); return f }

// col adds columns carrying the field's value.
func (f Field) col(cs ...Column) Field { f.ClickHouse = append(f.ClickHouse, cs...); return f }

func iana(name string, id uint16, t IEType) IE {
	return IE{Name: name, Enterprise: EnterpriseIANA, ID: id, Type: t}
}
func antrea(name string, id uint16, t IEType) IE {
	return IE{Name: name, Enterprise: EnterpriseAntrea, ID: id, Type: t}
}

// inbound marks an IE read from agents, never written.
func (ie IE) inbound() IE { ie.Inbound = true; return ie }

// fallback marks an IE read only while its field is unset.
func (ie IE) fallback() IE { ie.Fallback = true; return ie }

// carrying gives an IE its own value.
func (ie IE) carrying(v Value) IE { ie.Value = v; return ie }

// antreaCol is column pos of Antrea's table; flowtelCol one of flowtel's.
func antreaCol(name string, t ColumnType, pos int) Column {
	return Column{Name: name, Type: t, Antrea: pos}
}
func flowtelCol(name string, t ColumnType) Column { return Column{Name: name, Type: t} }

func (c Column) carrying(v Value, doc string) Column { c.Value, c.Doc = v, doc; return c }

// finish resolves the fields' values and gives each IE and column without a
// value of its own the field's.
func finish(fs []Field) []Field {
	for i := range fs {
		f := &fs[i]
		if f.value != nil {
			f.Value = f.value(f.Aggregation)
		}
		if f.wire.Kind == KindNone {
			f.wire = f.Ref
		}
		for j := range f.IPFIX {
			if f.IPFIX[j].Value.Kind == KindNone {
				f.IPFIX[j].Value, f.IPFIX[j].Ref = f.Value, f.wire
			}
		}
		for j := range f.ClickHouse {
			c := &f.ClickHouse[j]
			c.Attribute = f.Attribute
			c.Doc = strings.TrimSpace(f.Doc + " " + c.Doc)
			if c.Value.Kind == KindNone {
				c.Value, c.Ref = f.Value, f.wire
			}
		}
	}
	return fs
}

// read turns a pointer accessor into a value accessor; an aggregation field
// reads zero from a Record without Aggregation (and does not create it).
func read[T any](get func(*Record) *T, agg bool) func(*Record) T {
	if agg {
		return func(r *Record) T {
			if r.Aggregation == nil {
				var zero T
				return zero
			}
			return *get(r)
		}
	}
	return func(r *Record) T { return *get(r) }
}
