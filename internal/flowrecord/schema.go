package flowrecord

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// aggregation returns r's Aggregation, creating it: for decoding (a Value reads
// an aggregation field without creating it).
func aggregation(r *Record) *Aggregation {
	if r.Aggregation == nil {
		r.Aggregation = &Aggregation{}
	}
	return r.Aggregation
}

// Attribute constructors. Each takes an accessor returning a pointer into the
// Record, used for both directions. Zero values are omitted on encode unless
// the attribute is "always" written; an absent attribute decodes to zero.

func strAttr(name string, get func(*Record) *string) Field {
	return Field{Attribute: name, AttrType: "string",
		value: func(agg bool) Value { return Value{Kind: KindString, String: read(get, agg)} },
		enc: func(r *Record, e *encoder) {
			if v := *get(r); v != "" {
				e.putStr(name, v)
			}
		},
		dec:   func(r *Record, name string, v pcommon.Value, _ *spares) error { return decStr(name, v, get(r)) },
		store: storeOf(storeStr, get)}
}

// The dec* functions decode the attribute name, of value v, into dst, for
// an attribute's dec and for Decode's stores.

func decStr(name string, v pcommon.Value, dst *string) error {
	s, err := wantStr(name, v)
	*dst = s
	return err
}

func boolAttr(name string, get func(*Record) *bool) Field {
	return Field{Attribute: name, AttrType: "bool",
		value: func(agg bool) Value { return Value{Kind: KindBool, Bool: read(get, agg)} },
		enc: func(r *Record, e *encoder) {
			if *get(r) {
				e.b.AppendEmpty(name).SetBool(true)
			}
		},
		dec:   func(r *Record, name string, v pcommon.Value, _ *spares) error { return decBool(name, v, get(r)) },
		store: storeOf(storeBool, get)}
}

func decBool(name string, v pcommon.Value, dst *bool) error {
	b, ok := boolOf(v)
	if !ok {
		return typeError(name, "bool", v)
	}
	*dst = b
	return nil
}

// uintAttr encodes an unsigned integer of at most bits bits. always forces the
// attribute to be written when zero (counters a reader expects to find).
func uintAttr[T uint8 | uint16 | uint32 | uint64](name string, always bool, get func(*Record) *T) Field {
	var value func(agg bool) Value
	var kind storeKind
	switch g := any(get).(type) {
	case func(*Record) *uint8:
		kind, value = storeU8, func(agg bool) Value { return Value{Kind: KindUint8, Uint8: read(g, agg)} }
	case func(*Record) *uint16:
		kind, value = storeU16, func(agg bool) Value { return Value{Kind: KindUint16, Uint16: read(g, agg)} }
	case func(*Record) *uint32:
		kind, value = storeU32, func(agg bool) Value { return Value{Kind: KindUint32, Uint32: read(g, agg)} }
	case func(*Record) *uint64:
		kind, value = storeU64, func(agg bool) Value { return Value{Kind: KindUint64, Uint64: read(g, agg)} }
	}
	return Field{Attribute: name, AttrType: "int", value: value,
		enc: func(r *Record, e *encoder) {
			if v := *get(r); v != 0 || always {
				// uint64 counters above 2^63-1 cannot be held by an int attribute; they saturate.
				e.putInt(name, int64(min(uint64(v), uint64(math.MaxInt64))))
			}
		},
		dec:   func(r *Record, name string, v pcommon.Value, _ *spares) error { return decUint(name, v, get(r)) },
		store: storeOf(kind, get).writtenWhenZero(always)}
}

// decUint decodes an unsigned integer of T's size; a uint64 at most
// math.MaxInt64, as an int attribute holds.
func decUint[T uint8 | uint16 | uint32 | uint64](name string, v pcommon.Value, dst *T) error {
	i, ok := intOf(v)
	if !ok {
		return typeError(name, "int", v)
	}
	if maxV := min(uint64(^T(0)), math.MaxInt64); i < 0 || uint64(i) > maxV {
		return fmt.Errorf("attribute %q: value %d out of range [0, %d]", name, i, maxV)
	}
	*dst = T(i)
	return nil
}

func u16(name string, get func(*Record) *uint16) Field   { return uintAttr(name, false, get) }
func u32(name string, get func(*Record) *uint32) Field   { return uintAttr(name, false, get) }
func count(name string, get func(*Record) *uint64) Field { return uintAttr(name, true, get) }

func addrAttr(name string, get func(*Record) *netip.Addr) Field {
	return Field{Attribute: name, AttrType: "string",
		value: func(agg bool) Value { return Value{Kind: KindAddr, Addr: read(get, agg)} },
		enc: func(r *Record, e *encoder) {
			if a := *get(r); a.IsValid() {
				e.putStr(name, addrString(a))
			}
		},
		dec:   func(r *Record, name string, v pcommon.Value, _ *spares) error { return decAddr(name, v, get(r)) },
		store: storeOf(storeAddr, get)}
}

func decAddr(name string, v pcommon.Value, dst *netip.Addr) error {
	s, err := wantStr(name, v)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("attribute %q: %q is not an IP address", name, s)
	}
	*dst = a
	return nil
}

// timeAttr holds nanoseconds since the Unix epoch.
func timeAttr(name string, get func(*Record) *time.Time) Field {
	return Field{Attribute: name, AttrType: "int",
		value: func(agg bool) Value { return Value{Kind: KindTime, Time: read(get, agg)} },
		enc: func(r *Record, e *encoder) {
			if t := *get(r); !t.IsZero() {
				e.putInt(name, t.UnixNano())
			}
		},
		dec:   func(r *Record, name string, v pcommon.Value, _ *spares) error { return decTime(name, v, get(r)) },
		store: storeOf(storeTime, get)}
}

func decTime(name string, v pcommon.Value, dst *time.Time) error {
	ns, ok := intOf(v)
	if !ok {
		return typeError(name, "int", v)
	}
	if ns <= 0 {
		return fmt.Errorf("attribute %q: %d is not a time after the Unix epoch (ns)", name, ns)
	}
	*dst = time.Unix(0, ns).UTC()
	return nil
}

// enumAttr is never an aggregation field.
func enumAttr[T ~uint8](name string, names []string, get func(*Record) *T) Field {
	a := Field{Attribute: name, AttrType: "string",
		value: func(bool) Value {
			return Value{Kind: KindEnum, Uint8: func(r *Record) uint8 { return uint8(*get(r)) }, Names: names}
		},
		enc: func(r *Record, e *encoder) {
			if v := *get(r); v != 0 {
				e.putStr(name, enumString(names, v))
			}
		},
		dec:   func(r *Record, name string, v pcommon.Value, _ *spares) error { return decEnum(name, names, v, get(r)) },
		store: storeOf(storeEnum, get)}
	a.store.names = names
	return a
}

func decEnum[T ~uint8](name string, names []string, v pcommon.Value, dst *T) error {
	s, err := wantStr(name, v)
	if err != nil {
		return err
	}
	e, ok := parseEnum[T](names, s)
	if !ok {
		return fmt.Errorf("attribute %q: unknown value %q (want one of %v)", name, s, names[1:])
	}
	*dst = e
	return nil
}

func labelsAttr(name string, slot int, get func(*Record) *map[string]string) Field {
	return Field{Attribute: name, AttrType: "map<string,string>",
		value: func(agg bool) Value { return Value{Kind: KindLabels, Labels: read(get, agg)} },
		enc: func(r *Record, e *encoder) {
			if labels := *get(r); labels != nil {
				e.labelsMap(name, labels) // encoder.go
			}
		},
		dec: func(r *Record, name string, v pcommon.Value, sp *spares) error {
			m, ok := mapOf(v)
			if !ok {
				return typeError(name, "map", v)
			}
			if n := m.Len(); n > MaxLabels {
				return fmt.Errorf("attribute %q: %d labels (at most %d)", name, n, MaxLabels)
			}
			labels := sp.take(slot, m.Len())
			*get(r) = labels
			label := func(k string, lv pcommon.Value) error {
				s, ok := strOf(lv)
				if !ok {
					return fmt.Errorf("attribute %q: label %q is %s, want string", name, k, lv.Type())
				}
				labels[k] = s
				return nil
			}
			if readFast { // pdataread.go
				for i, kvs := 0, entries(m); i < len(kvs); i++ {
					if err := label(kvs[i].key, valueAt(&kvs[i], m)); err != nil {
						return err
					}
				}
				return nil
			}
			var err error
			// Range, not All: the range-over-func loop's closure escaped (two allocations a map).
			m.Range(func(k string, lv pcommon.Value) bool {
				err = label(k, lv)
				return err == nil
			})
			return err
		}}
}

func ctLabelsAttr(name string) Field {
	return Field{Attribute: name, AttrType: "string",
		value: func(bool) Value { return Value{Kind: KindString, String: ctLabelsText} },
		enc: func(r *Record, e *encoder) {
			if r.Conntrack.Labels != ([16]byte{}) {
				e.putStr(name, ctLabelsText(r))
			}
		},
		dec: func(r *Record, name string, v pcommon.Value, _ *spares) error {
			s, err := wantStr(name, v)
			if err != nil {
				return err
			}
			if len(s) != 32 {
				return fmt.Errorf("attribute %q: want 32 hex digits, got %d characters", name, len(s))
			}
			if _, err := hex.Decode(r.Conntrack.Labels[:], []byte(s)); err != nil {
				return fmt.Errorf("attribute %q: %v", name, err)
			}
			return nil
		}}
}

// ctLabelsText is the conntrack labels as 32 hex digits, "" when all zero.
func ctLabelsText(r *Record) string {
	if r.Conntrack.Labels == ([16]byte{}) {
		return ""
	}
	return hex.EncodeToString(r.Conntrack.Labels[:])
}

func wantStr(name string, v pcommon.Value) (string, error) {
	s, ok := strOf(v)
	if !ok {
		return "", typeError(name, "string", v)
	}
	return s, nil
}

func typeError(name, want string, v pcommon.Value) error {
	return fmt.Errorf("attribute %q: want %s, got %s", name, want, v.Type())
}

// Attribute names used outside the table (required fields and derived ones).
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
