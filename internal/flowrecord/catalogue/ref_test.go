package catalogue

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// Every IE and column carrying its field's Value carries its field's Ref, and
// reading through that Ref (Direct, as a writer does) gives what the Value
// reads, for every test record; an IE or column with a Value of its own
// carries no Ref.
func TestWiresCarryTheFieldsRef(t *testing.T) {
	type wire struct {
		name string
		v    Value
		ref  Ref
	}
	var wires []wire
	for _, f := range catalogue {
		for _, ie := range f.IPFIX {
			wires = append(wires, wire{"IE " + ie.Name, ie.Value, ie.Ref})
		}
		for _, c := range f.ClickHouse {
			wires = append(wires, wire{"column " + c.Name, c.Value, c.Ref})
		}
	}
	direct := 0
	for _, w := range wires {
		if w.ref.Kind == KindNone || w.ref.Aggregation {
			continue
		}
		direct++
		for i, r := range flowrecordtest.Records() {
			var got, want any
			switch w.v.Kind {
			case KindUint8, KindEnum:
				got, want = directGet[uint8](t, w.ref, r), w.v.Uint8(r)
			case KindUint16:
				got, want = directGet[uint16](t, w.ref, r), w.v.Uint16(r)
			case KindUint32:
				got, want = directGet[uint32](t, w.ref, r), w.v.Uint32(r)
			case KindUint64:
				got, want = directGet[uint64](t, w.ref, r), w.v.Uint64(r)
			case KindTime:
				got, want = directGet[time.Time](t, w.ref, r), w.v.Time(r)
			case KindAddr:
				got, want = directGet[netip.Addr](t, w.ref, r), w.v.Addr(r)
			case KindString:
				got, want = directGet[string](t, w.ref, r), w.v.String(r)
			case KindLabels:
				got, want = directGet[Labels](t, w.ref, r), w.v.Labels(r)
			default:
				t.Fatalf("%s: a %s value", w.name, w.v.Kind)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, record %d: the Ref reads %v, the Value %v", w.name, i, got, want)
			}
		}
	}
	if direct < len(wires)*3/4 {
		t.Errorf("only %d of %d IEs and columns carry a Ref", direct, len(wires))
	}
}

// directGet reads ref's field in r directly, as a V.
func directGet[V any](t *testing.T, ref Ref, r *Record) V {
	t.Helper()
	d := NewReader[V](ref, nil)
	if !d.Direct() {
		t.Fatalf("a %s Ref does not read a %T", ref.Kind, *new(V))
	}
	return d.Get(r)
}

// A Reader reads directly only a field of its type outside the Aggregation;
// At creates the Aggregation it writes into.
func TestReaderAndAt(t *testing.T) {
	var thr, port Ref
	for _, f := range catalogue {
		switch f.Attribute {
		case "flow.throughput":
			thr = f.Ref
		case "source.port":
			port = f.Ref
		}
	}
	via := func(*Record) uint16 { return 7 }
	for name, d := range map[string]Reader[uint16]{"aggregation": NewReader(thr, via), "zero Ref": NewReader(Ref{}, via)} {
		if d.Direct() || d.Get(&Record{}) != 7 {
			t.Errorf("%s: read directly", name)
		}
	}
	if d := NewReader[string](port, nil); d.Direct() {
		t.Error("a uint16 field reads as a string")
	}
	d := NewReader(port, via)
	if !d.Direct() || d.Get(&Record{Source: flowrecord.Endpoint{Port: 443}}) != 443 {
		t.Errorf("source.port: direct %v", d.Direct())
	}
	r := &Record{}
	*thr.At(r).Uint64() = 42
	if r.Aggregation == nil || r.Aggregation.Throughput != 42 {
		t.Errorf("At wrote %+v", r.Aggregation)
	}
}
