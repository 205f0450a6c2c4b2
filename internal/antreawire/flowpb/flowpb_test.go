package flowpb

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Every catalogue field has a Flow mapping or is listed, with why, as
// unmapped; never both, and nothing else is listed.
func TestEveryCatalogueFieldIsMappedOrListed(t *testing.T) {
	mapped := map[string]bool{}
	for _, m := range fields {
		mapped[m.Name] = true
	}
	names := map[string]bool{}
	for _, f := range catalogue.Fields() {
		names[f.Name()] = true
		_, listed := Unmapped[f.Name()]
		switch {
		case mapped[f.Name()] && listed:
			t.Errorf("%s: mapped and listed as unmapped", f.Name())
		case !mapped[f.Name()] && !listed:
			t.Errorf("%s: neither mapped to Antrea's Flow nor listed in Unmapped", f.Name())
		}
	}
	for name := range Unmapped {
		if !names[name] {
			t.Errorf("Unmapped lists %s, which is no catalogue field", name)
		}
	}
	if len(fields) < 60 {
		t.Errorf("only %d fields mapped", len(fields))
	}
}

// Each mapped field, set alone in a Record, crosses a Flow (Put, proto
// marshalling, Take) and comes back as it was; the fields agents send come
// back also through Take with agent set, the others not. Driven by the
// catalogue: a new mapped field is covered without touching this test.
func TestEveryMappedFieldRoundTrips(t *testing.T) {
	for _, cf := range catalogue.Fields() {
		m, ok := mapped(cf.Name())
		if !ok || m.putRecord != nil {
			continue // derived (network.type: TestPutDerived)
		}
		want := BaseRecord()
		if cf.Aggregation {
			want.Aggregation = &flowrecord.Aggregation{}
		}
		SetField(t, cf.Name(), cf.WireRef(), &want)
		before := want
		if cf.Aggregation {
			a := *want.Aggregation
			before.Aggregation = &a
		}
		var f pb.Flow
		Put(&want, &f)
		if !reflect.DeepEqual(want, before) {
			t.Fatalf("%s: Put changed the record", cf.Name())
		}
		b, err := proto.Marshal(&f)
		if err != nil {
			t.Fatal(err)
		}
		var back pb.Flow
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got := flowrecord.Record{}
		if err := Take(&back, &got, false); err != nil {
			t.Errorf("%s: %v", cf.Name(), err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v", cf.Name(), got, want)
		}
		var agent flowrecord.Record
		if err := Take(&back, &agent, true); err != nil {
			t.Errorf("%s, agent: %v", cf.Name(), err)
			continue
		}
		v := cf.WireRef()
		if gotAgent := fieldValue(v, &agent); m.Agent != reflect.DeepEqual(gotAgent, fieldValue(v, &want)) {
			t.Errorf("%s: agent %v, but Take for agents reads %v", cf.Name(), m.Agent, gotAgent)
		}
		// Read into a record in use, a Flow without the field clears it.
		if err := Take(&pb.Flow{}, &got, false); err != nil {
			t.Fatal(err)
		}
		if cf.Aggregation {
			continue // read only from a Flow with an aggregation block
		}
		if left := fieldValue(v, &got); !reflect.ValueOf(left).IsZero() && cf.Name() != "flow.direction" {
			t.Errorf("%s: a Flow without it leaves %v", cf.Name(), left)
		}
	}
}

func mapped(name string) (Field, bool) {
	for _, m := range fields {
		if m.Name == name {
			return m, true
		}
	}
	return Field{}, false
}

// Put writes the IP version from the source address.
func TestPutDerived(t *testing.T) {
	for a, want := range map[string]pb.IPVersion{"10.0.0.1": pb.IPVersion_IP_VERSION_4, "fd00::1": pb.IPVersion_IP_VERSION_6} {
		r := flowrecord.Record{Source: flowrecord.Endpoint{Address: netip.MustParseAddr(a)}}
		var f pb.Flow
		Put(&r, &f)
		if f.GetIp().GetVersion() != want {
			t.Errorf("%s: version %v", a, f.GetIp().GetVersion())
		}
	}
}

// Values that do not fit their field are refused, naming the field.
func TestTakeRefuses(t *testing.T) {
	for name, f := range map[string]*pb.Flow{
		"ip.source":                    {Ip: &pb.IP{Source: []byte{1, 2, 3}}},
		"transport: source port":       {Transport: &pb.Transport{SourcePort: 70000}},
		"transport: protocol number":   {Transport: &pb.Transport{ProtocolNumber: 256}},
		"end_reason":                   {EndReason: 300},
		"k8s.flow_type":                {K8S: &pb.Kubernetes{FlowType: -1}},
		"k8s: network policy type":     {K8S: &pb.Kubernetes{EgressNetworkPolicyRuleAction: 256}},
		"k8s.destination_service_port": {K8S: &pb.Kubernetes{DestinationServicePort: 1 << 16}},
		"empty flow":                   nil,
	} {
		var r flowrecord.Record
		err := Take(f, &r, true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The deprecated destination_cluster_ip is read when destination_service_ip is absent.
func TestTakeClusterIPFallback(t *testing.T) {
	var r flowrecord.Record
	if err := Take(&pb.Flow{K8S: &pb.Kubernetes{DestinationClusterIp: []byte{10, 96, 0, 1}}}, &r, true); err != nil {
		t.Fatal(err)
	}
	if r.Service.Address != netip.MustParseAddr("10.96.0.1") {
		t.Errorf("service address %v", r.Service.Address)
	}
}

func fieldValue(ref catalogue.Ref, r *flowrecord.Record) any {
	if ref.Aggregation && r.Aggregation == nil {
		return nil
	}
	l := ref.At(r)
	switch ref.Kind {
	case catalogue.KindUint8, catalogue.KindEnum:
		return *l.Uint8()
	case catalogue.KindUint16:
		return *l.Uint16()
	case catalogue.KindUint32:
		return *l.Uint32()
	case catalogue.KindUint64:
		return *l.Uint64()
	case catalogue.KindTime:
		return *l.Time()
	case catalogue.KindAddr:
		return *l.Addr()
	case catalogue.KindString:
		return *l.String()
	case catalogue.KindLabels:
		return *l.Labels()
	}
	return nil
}

// BaseRecord is what every record carries on the Flow: its end, its
// endpoints' addresses, a direction (a record without one reads back as
// unknown, Antrea's 255).
func BaseRecord() flowrecord.Record {
	return flowrecord.Record{
		End:         time.Unix(1_700_000_100, 0).UTC(),
		Source:      flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.1")},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.2")},
		Direction:   flowrecord.DirectionEgress,
	}
}

// SetField gives the field at ref a value other than its base one.
func SetField(t *testing.T, name string, ref catalogue.Ref, r *flowrecord.Record) {
	t.Helper()
	l := ref.At(r)
	switch ref.Kind {
	case catalogue.KindUint8:
		*l.Uint8() = 7
	case catalogue.KindEnum:
		*l.Uint8() = uint8(len(ref.Names) - 1)
	case catalogue.KindUint16:
		*l.Uint16() = 4242
	case catalogue.KindUint32:
		*l.Uint32() = 4_000_000_000
	case catalogue.KindUint64:
		*l.Uint64() = 1 << 40
	case catalogue.KindTime:
		*l.Time() = time.Unix(1_700_000_000, 123).UTC()
	case catalogue.KindAddr:
		*l.Addr() = netip.MustParseAddr("10.1.2.3")
	case catalogue.KindString:
		*l.String() = "value-of-" + name
	case catalogue.KindLabels:
		*l.Labels() = map[string]string{"app": name}
	default:
		t.Fatalf("%s: no value for a %s field", name, ref.Kind)
	}
}
