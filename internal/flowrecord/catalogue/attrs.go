package catalogue

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// aggregation returns r's Aggregation, creating it: for the accessors of
// aggregation fields (a Value reads one without creating it).
func aggregation(r *Record) *flowrecord.Aggregation {
	if r.Aggregation == nil {
		r.Aggregation = &flowrecord.Aggregation{}
	}
	return r.Aggregation
}

// Field constructors, one a kind. Each takes an accessor returning a pointer
// into the Record: the Value reads through it, the Ref is where it points.

func strAttr(name string, get func(*Record) *string) Field {
	return Field{Attribute: name, AttrType: "string", Ref: refOf(KindString, get),
		value: func(agg bool) Value { return Value{Kind: KindString, String: read(get, agg)} }}
}

func boolAttr(name string, get func(*Record) *bool) Field {
	return Field{Attribute: name, AttrType: "bool", Ref: refOf(KindBool, get),
		value: func(agg bool) Value { return Value{Kind: KindBool, Bool: read(get, agg)} }}
}

// uintAttr is an unsigned integer field; always writes it when zero.
func uintAttr[T uint8 | uint16 | uint32 | uint64](name string, always bool, get func(*Record) *T) Field {
	f := Field{Attribute: name, AttrType: "int", WrittenWhenZero: always}
	switch g := any(get).(type) {
	case func(*Record) *uint8:
		f.Ref, f.value = refOf(KindUint8, g), func(agg bool) Value { return Value{Kind: KindUint8, Uint8: read(g, agg)} }
	case func(*Record) *uint16:
		f.Ref, f.value = refOf(KindUint16, g), func(agg bool) Value { return Value{Kind: KindUint16, Uint16: read(g, agg)} }
	case func(*Record) *uint32:
		f.Ref, f.value = refOf(KindUint32, g), func(agg bool) Value { return Value{Kind: KindUint32, Uint32: read(g, agg)} }
	case func(*Record) *uint64:
		f.Ref, f.value = refOf(KindUint64, g), func(agg bool) Value { return Value{Kind: KindUint64, Uint64: read(g, agg)} }
	}
	return f
}

func u16(name string, get func(*Record) *uint16) Field   { return uintAttr(name, false, get) }
func u32(name string, get func(*Record) *uint32) Field   { return uintAttr(name, false, get) }
func count(name string, get func(*Record) *uint64) Field { return uintAttr(name, true, get) }

func addrAttr(name string, get func(*Record) *netip.Addr) Field {
	return Field{Attribute: name, AttrType: "string", Ref: refOf(KindAddr, get),
		value: func(agg bool) Value { return Value{Kind: KindAddr, Addr: read(get, agg)} }}
}

// timeAttr holds nanoseconds since the Unix epoch in the attribute form.
func timeAttr(name string, get func(*Record) *time.Time) Field {
	return Field{Attribute: name, AttrType: "int", Ref: refOf(KindTime, get),
		value: func(agg bool) Value { return Value{Kind: KindTime, Time: read(get, agg)} }}
}

// enumAttr is an enumeration, written by name; never an aggregation field.
func enumAttr[T flowrecord.Enum](name string, get func(*Record) *T) Field {
	names := T(0).Names()
	ref := refOf(KindEnum, get)
	ref.Names = names
	return Field{Attribute: name, AttrType: "string", Ref: ref,
		value: func(bool) Value {
			return Value{Kind: KindEnum, Uint8: func(r *Record) uint8 { return uint8(*get(r)) }, Names: names}
		}}
}

// labelsAttr is a Pod's labels; slot says whose (0 source, 1 destination).
func labelsAttr(name string, slot int, get func(*Record) *map[string]string) Field {
	ref := refOf(KindLabels, get)
	ref.LabelsSlot = slot
	return Field{Attribute: name, AttrType: "map<string,string>", Ref: ref,
		value: func(agg bool) Value { return Value{Kind: KindLabels, Labels: read(get, agg)} }}
}

// ctLabelsAttr is the conntrack labels: 16 bytes in the Record, 32 hex
// digits in the attribute form.
func ctLabelsAttr(name string) Field {
	return Field{Attribute: name, AttrType: "string",
		Ref:   refOf(KindBytes16, func(r *Record) *[16]byte { return &r.Conntrack.Labels }),
		value: func(bool) Value { return Value{Kind: KindString, String: CTLabelsText} }}
}

// CTLabelsText is the conntrack labels as 32 hex digits, "" when all zero.
func CTLabelsText(r *Record) string {
	if r.Conntrack.Labels == ([16]byte{}) {
		return ""
	}
	return hex.EncodeToString(r.Conntrack.Labels[:])
}

// Attribute names used outside the catalogue (required fields, derived
// ones, the routing key).
const (
	AttrSourceAddress      = "source.address"
	AttrDestinationAddress = "destination.address"
	AttrNetworkTransport   = "network.transport"
	AttrNetworkType        = "network.type"
	AttrProtocol           = "flow.protocol_identifier"
	AttrKey                = "flow.key"
	AttrCorrelationState   = "flow.correlation.state"
)

// Resource attributes set by node collectors on the ResourceLogs they emit.
const (
	ResourceNodeName   = "k8s.node.name"
	ResourceClusterUID = "k8s.cluster.uid"
)

// ErrMissingAttribute is wrapped by the codecs' errors for a record without
// a required attribute (the addresses, and the protocol in the attribute form).
var ErrMissingAttribute = errors.New("missing required attribute")

// Missing is the error for a record without the required attribute name.
func Missing(name string) error { return fmt.Errorf("%w %q", ErrMissingAttribute, name) }

// LogTimestamp is t as a LogRecord timestamp (the record's end and export
// time travel as its Timestamp and ObservedTimestamp), 0 for the zero time.
func LogTimestamp(t time.Time) pcommon.Timestamp {
	if t.IsZero() {
		return 0
	}
	return pcommon.Timestamp(t.UnixNano())
}

// FromLogTimestamp is LogTimestamp's inverse.
func FromLogTimestamp(ts pcommon.Timestamp) time.Time {
	if ts == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ts)).UTC()
}
