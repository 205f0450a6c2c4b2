package flowrecordtest

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
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
func (s *byteSource) counters() flowrecord.Counters {
	return flowrecord.Counters{PacketTotal: s.u63(), OctetTotal: s.u63(), PacketDelta: s.u63(), OctetDelta: s.u63()}
}
func (s *byteSource) endpoint(required bool) flowrecord.Endpoint {
	a := s.addr()
	if required && !a.IsValid() {
		a = netip.AddrFrom4([4]byte{10, 0, 0, 1})
	}
	return flowrecord.Endpoint{Address: a, Port: s.u16(), Kind: flowrecord.EndpointKind(s.enum(len(flowrecord.EndpointKind(0).Names()))),
		Namespace: s.str(), PodName: s.str(), PodUID: s.str(), PodLabels: s.labels(),
		WorkloadKind: s.str(), WorkloadName: s.str(), NodeName: s.str(), NodeUID: s.str()}
}
func (s *byteSource) policy() flowrecord.Policy {
	return flowrecord.Policy{Type: flowrecord.PolicyType(s.enum(len(flowrecord.PolicyType(0).Names()))), Namespace: s.str(), Name: s.str(), UID: s.str(),
		RuleName: s.str(), RuleAction: flowrecord.RuleAction(s.enum(len(flowrecord.RuleAction(0).Names())))}
}

// FromBytes builds an arbitrary valid record (required fields present) from
// fuzz input.
func FromBytes(data []byte) *flowrecord.Record {
	s := &byteSource{b: data}
	r := &flowrecord.Record{Start: s.time(), End: s.time(), Observed: s.time(), Protocol: s.u8(),
		Source: s.endpoint(true), Destination: s.endpoint(true),
		OriginalDestinationAddress: s.addr(), OriginalDestinationPort: s.u16(),
		Stats: s.counters(), ReverseStats: s.counters(),
		EndReason: flowrecord.EndReason(s.enum(len(flowrecord.EndReason(0).Names()))), TCPState: s.str(), FlowType: flowrecord.FlowType(s.enum(len(flowrecord.FlowType(0).Names()))),
		Service:          flowrecord.Service{PortName: s.str(), UID: s.str(), Address: s.addr(), Port: s.u16()},
		ProxySNATAddress: s.addr(), ProxySNATPort: s.u16(),
		IngressPolicy: s.policy(), EgressPolicy: s.policy(),
		Egress:    flowrecord.Egress{Name: s.str(), UID: s.str(), Address: s.addr(), NodeName: s.str(), NodeUID: s.str()},
		Conntrack: flowrecord.Conntrack{ID: s.u32(), Zone: s.u16(), Mark: s.u32(), Labels: [16]byte(s.take(16))},
		Reporter:  flowrecord.Reporter{NodeName: s.str(), Side: flowrecord.Side(s.enum(len(flowrecord.Side(0).Names())))},
		Direction: flowrecord.Direction(s.enum(len(flowrecord.Direction(0).Names()))), Key: s.str(),
		Correlation: flowrecord.CorrelationState(s.enum(len(flowrecord.CorrelationState(0).Names()))), Evicted: s.u8()%2 == 1,
		Origin: flowrecord.Origin{ObservationDomainID: s.u32(), ExporterAddress: s.addr()},
	}
	if s.u8()%2 == 1 {
		r.Aggregation = &flowrecord.Aggregation{EndFromSource: s.time(), EndFromDestination: s.time(),
			StatsFromSource: s.counters(), ReverseStatsFromSource: s.counters(),
			StatsFromDestination: s.counters(), ReverseStatsFromDestination: s.counters(),
			Throughput: s.u63(), ReverseThroughput: s.u63(), ThroughputFromSource: s.u63(),
			ReverseThroughputFromSource: s.u63(), ThroughputFromDestination: s.u63(), ReverseThroughputFromDestination: s.u63()}
	}
	return r
}
