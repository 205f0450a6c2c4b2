package catalogue_test

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"google.golang.org/protobuf/proto"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/antreawire/flowpb"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
)

// Each field of the catalogue, set alone in a Record, crosses the wires
// that take their field list from the catalogue and comes back as it was:
// the attribute form and the compact form, each both ways. Driven by the
// catalogue's entries, so a new entry is covered without touching this test.
// Antrea's protobuf Flow (flowpb, flow_stream's toFlow and antrea_flows'
// fromFlow) is crossed both ways too, by every field it maps; IPFIX out and
// in (the ipfix exporter's agent layout into antrea_flows) by
// antrea_flows' TestEveryIPFIXFieldCrossesOutAndIn, which can run both.
// (The IPFIX layouts and the ClickHouse table are checked against the same
// entries by their own packages.)
func TestEveryFieldCrossesTheCatalogueWires(t *testing.T) {
	wires := map[string]struct {
		enc func(*flowrecord.Record, plog.LogRecord)
		dec func(plog.LogRecord, *flowrecord.Record) error
	}{
		"attributes": {attrcodec.Encode, attrcodec.Decode},
		"compact": {compactcodec.Encode, func(lr plog.LogRecord, r *flowrecord.Record) error {
			return compactcodec.Decode(lr, r, nil)
		}},
	}
	inFlow := map[string]bool{}
	for _, m := range flowpb.Fields() {
		inFlow[m.Name] = true
	}
	n, flows := 0, 0
	for _, f := range catalogue.Fields() {
		if inFlow[f.Name()] && !f.Derived {
			flows++
			crossFlow(t, f)
		}
		if f.Ref.Kind == catalogue.KindNone || f.Derived {
			continue
		}
		n++
		want := baseRecord()
		set(t, f, &want)
		for name, w := range wires {
			if name == "compact" && f.Attribute == catalogue.AttrKey {
				continue // the compact form carries the key as an attribute of its own, which its tests cover
			}
			in := want
			lr := plog.NewLogRecord()
			w.enc(&in, lr)
			var got flowrecord.Record
			if err := w.dec(lr, &got); err != nil {
				t.Errorf("%s, %s: %v", f.Attribute, name, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, %s: decoded\n%+v\nwant\n%+v", f.Attribute, name, got, want)
			}
		}
	}
	if n < 80 || flows < 60 {
		t.Errorf("only %d fields with a Ref, %d in the Flow", n, flows)
	}
}

// crossFlow: f set alone crosses Antrea's Flow message (Put, the protobuf
// bytes, Take) and comes back as it was.
func crossFlow(t *testing.T, f catalogue.Field) {
	t.Helper()
	want := baseRecord()
	want.Key, want.Observed = "", time.Time{}   // the Flow's id is flow.key; Observed is outside the catalogue
	want.Direction = flowrecord.DirectionEgress // no direction reads back as unknown (Antrea's 255)
	if f.Aggregation {
		want.Aggregation = &flowrecord.Aggregation{}
	}
	ref := f.WireRef()
	if f.Ref.Kind == catalogue.KindNone {
		f.Ref = ref // set through the Ref the wires carry (the end)
	}
	set(t, f, &want)
	in := want
	var msg pb.Flow
	flowpb.Put(&in, &msg)
	b, err := proto.Marshal(&msg)
	if err != nil {
		t.Fatal(err)
	}
	var back pb.Flow
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var got flowrecord.Record
	if err := flowpb.Take(&back, &got, false); err != nil {
		t.Errorf("%s, Flow: %v", f.Name(), err)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s, Flow: read back\n%+v\nwant\n%+v", f.Name(), got, want)
	}
}

// baseRecord is what every record needs on the wires: its end, when it was
// observed, its endpoints' addresses, its key (the compact form's routing
// attribute).
func baseRecord() flowrecord.Record {
	return flowrecord.Record{
		End:         time.Unix(1_700_000_100, 0).UTC(),
		Observed:    time.Unix(1_700_000_101, 0).UTC(),
		Source:      flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.1")},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.2")},
		Key:         "k",
	}
}

// set gives the field f of r a value other than zero, through its Ref.
func set(t *testing.T, f catalogue.Field, r *flowrecord.Record) {
	t.Helper()
	p := f.Ref.At(r)
	switch f.Ref.Kind {
	case catalogue.KindUint8:
		*p.Uint8() = 7
	case catalogue.KindEnum:
		*p.Uint8() = uint8(len(f.Ref.Names) - 1)
	case catalogue.KindUint16:
		*p.Uint16() = 4242
	case catalogue.KindUint32:
		*p.Uint32() = 4_000_000_000
	case catalogue.KindUint64:
		*p.Uint64() = 1 << 40
	case catalogue.KindBool:
		*p.Bool() = true
	case catalogue.KindTime:
		*p.Time() = time.Unix(1_700_000_000, 123).UTC()
	case catalogue.KindAddr:
		*p.Addr() = netip.MustParseAddr("10.1.2.3")
	case catalogue.KindString:
		if *p.String() == "" {
			*p.String() = "value-of-" + f.Attribute
		} else {
			*p.String() += "-changed"
		}
	case catalogue.KindLabels:
		*p.Labels() = map[string]string{"app": f.Attribute}
	case catalogue.KindBytes16:
		p.Bytes16()[15] = 1
	default:
		t.Fatalf("%s: no value for a %s field", f.Attribute, f.Ref.Kind)
	}
}
