package flowrecord

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// byteSource hands out values from fuzz input, zero once it runs dry.
type byteSource struct{ b []byte }

func (s *byteSource) take(n int) []byte {
	out := make([]byte, n)
	k := copy(out, s.b)
	s.b = s.b[k:]
	return out
}
func (s *byteSource) u8() uint8   { return s.take(1)[0] }
func (s *byteSource) u16() uint16 { return binary.BigEndian.Uint16(s.take(2)) }
func (s *byteSource) u32() uint32 { return binary.BigEndian.Uint32(s.take(4)) }
func (s *byteSource) u63() uint64 { return binary.BigEndian.Uint64(s.take(8)) >> 1 }
func (s *byteSource) str() string { return string(s.take(int(s.u8() % 24))) }
func (s *byteSource) enum(n int) uint8 {
	return s.u8() % uint8(n)
}
func (s *byteSource) addr() netip.Addr {
	switch s.u8() % 3 {
	case 0:
		return netip.Addr{}
	case 1:
		return netip.AddrFrom4([4]byte(s.take(4)))
	default:
		return netip.AddrFrom16([16]byte(s.take(16)))
	}
}
func (s *byteSource) time() time.Time {
	ns := int64(s.u63())
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
func (s *byteSource) labels() map[string]string {
	n := int(s.u8() % 4)
	if n == 3 {
		return nil
	}
	m := map[string]string{}
	for range n {
		m[s.str()] = s.str()
	}
	return m
}
func (s *byteSource) counters() Counters {
	return Counters{s.u63(), s.u63(), s.u63(), s.u63()}
}
func (s *byteSource) endpoint(required bool) Endpoint {
	a := s.addr()
	if required && !a.IsValid() {
		a = netip.AddrFrom4([4]byte{10, 0, 0, 1})
	}
	return Endpoint{Address: a, Port: s.u16(), Kind: EndpointKind(s.enum(len(endpointKindNames))),
		Namespace: s.str(), PodName: s.str(), PodUID: s.str(), PodLabels: s.labels(),
		WorkloadKind: s.str(), WorkloadName: s.str(), NodeName: s.str(), NodeUID: s.str()}
}
func (s *byteSource) policy() Policy {
	return Policy{Type: PolicyType(s.enum(len(policyTypeNames))), Namespace: s.str(), Name: s.str(), UID: s.str(),
		RuleName: s.str(), RuleAction: RuleAction(s.enum(len(ruleActionNames)))}
}

// recordFrom builds an arbitrary valid record (required fields present) from fuzz input.
func recordFrom(data []byte) *Record {
	s := &byteSource{b: data}
	r := &Record{Start: s.time(), End: s.time(), Observed: s.time(), Protocol: s.u8(),
		Source: s.endpoint(true), Destination: s.endpoint(true),
		OriginalDestinationAddress: s.addr(), OriginalDestinationPort: s.u16(),
		Stats: s.counters(), ReverseStats: s.counters(),
		EndReason: EndReason(s.enum(len(endReasonNames))), TCPState: s.str(), FlowType: FlowType(s.enum(len(flowTypeNames))),
		Service:          Service{PortName: s.str(), UID: s.str(), Address: s.addr(), Port: s.u16()},
		ProxySNATAddress: s.addr(), ProxySNATPort: s.u16(),
		IngressPolicy: s.policy(), EgressPolicy: s.policy(),
		Egress:    Egress{Name: s.str(), UID: s.str(), Address: s.addr(), NodeName: s.str(), NodeUID: s.str()},
		Conntrack: Conntrack{ID: s.u32(), Zone: s.u16(), Mark: s.u32(), Labels: [16]byte(s.take(16))},
		Reporter:  Reporter{NodeName: s.str(), Side: Side(s.enum(len(sideNames)))},
		Direction: Direction(s.enum(len(directionNames))), Key: s.str(),
		Correlation: CorrelationState(s.enum(len(correlationNames))), Evicted: s.u8()%2 == 1,
		Origin: Origin{ObservationDomainID: s.u32(), ExporterAddress: s.addr()},
	}
	if s.u8()%2 == 1 {
		r.Aggregation = &Aggregation{EndFromSource: s.time(), EndFromDestination: s.time(),
			StatsFromSource: s.counters(), ReverseStatsFromSource: s.counters(),
			StatsFromDestination: s.counters(), ReverseStatsFromDestination: s.counters(),
			Throughput: s.u63(), ReverseThroughput: s.u63(), ThroughputFromSource: s.u63(),
			ReverseThroughputFromSource: s.u63(), ThroughputFromDestination: s.u63(), ReverseThroughputFromDestination: s.u63()}
	}
	return r
}

// FuzzRoundTrip: Decode(Encode(r)) == r for any record.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19"))
	f.Add(make([]byte, 600))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := recordFrom(data)
		lr := plog.NewLogRecord()
		Encode(in, lr)
		var out Record
		if err := Decode(lr, &out); err != nil {
			t.Fatalf("decode of an encoded record failed: %v", err)
		}
		if !reflect.DeepEqual(in, &out) {
			t.Fatalf("round trip changed the record:\n in=%+v\nout=%+v", in, &out)
		}
	})
}

// FuzzDecode: decoding arbitrary attribute maps never panics; it succeeds or
// returns an error, the same through pdata's API as through its internals,
// with Decode as with a Decoder.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{}, int64(0), "x")
	f.Add([]byte{1, 2, 3, 4, 5}, int64(-1), "10.0.0.1")
	f.Add([]byte{0, 0, 0, 0}, int64(70000), "not-an-ip")
	f.Fuzz(func(t *testing.T, picks []byte, i int64, s string) {
		decodesAsAPI(t, mutated(picks, i, s))
	})
}

// mutated is a full record with the attributes picks name removed or
// replaced by values of every type made of i and s.
func mutated(picks []byte, i int64, s string) plog.LogRecord {
	lr := plog.NewLogRecord()
	Encode(fullRecord(), lr)
	m := lr.Attributes()
	for _, p := range picks {
		name := attributes[int(p)%len(attributes)].Name
		switch p % 7 {
		case 0:
			m.Remove(name)
		case 1:
			m.PutStr(name, s)
		case 2:
			m.PutInt(name, i)
		case 3:
			m.PutBool(name, i%2 == 0)
		case 4:
			m.PutDouble(name, float64(i))
		case 5:
			sub := m.PutEmptyMap(name)
			sub.PutStr(s, s)
			sub.PutInt(s+"i", i)
		case 6:
			m.PutEmptyBytes(name).FromRaw([]byte(s))
		}
	}
	return lr
}
