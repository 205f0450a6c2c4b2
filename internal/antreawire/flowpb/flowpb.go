// Package flowpb is the one mapping between flowtel's record and Antrea's
// protobuf Flow message (api/flowstreampb): for each catalogue field the Flow
// carries, how it is written into a Flow and read back, keyed by the field's
// catalogue name and located in the Record through its catalogue Ref. The
// flow_stream exporter writes Flows with Put; the antrea_flows receiver reads
// the agents' Flows with Take. Unmapped lists, with why, the catalogue fields
// no Flow carries: a catalogue field in neither fails this package's tests.
package flowpb

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Field is how one catalogue field crosses a Flow.
type Field struct {
	// Name is the catalogue field's Name.
	Name string
	// Agent: Antrea's agents send it, and antrea_flows reads it from them
	// (Take with agent set reads only these).
	Agent bool

	ref  catalogue.Ref
	put  func(catalogue.Loc, *pb.Flow)
	take func(*pb.Flow, catalogue.Loc) error
	// putRecord writes a field without a Ref (a derived one) from the Record.
	putRecord func(*flowrecord.Record, *pb.Flow)
}

// Unmapped are the catalogue fields Antrea's Flow has no place for, and why.
var Unmapped = map[string]string{
	"network.transport":                 "derived from the protocol number, which the Flow carries",
	"flow.source.kind":                  "flowtel's own; the Flow has no endpoint kind",
	"flow.destination.kind":             "flowtel's own; the Flow has no endpoint kind",
	"source.k8s.workload.kind":          "the Flow has no workload",
	"source.k8s.workload.name":          "the Flow has no workload",
	"destination.k8s.workload.kind":     "the Flow has no workload",
	"destination.k8s.workload.name":     "the Flow has no workload",
	"flow.original_destination.address": "the Flow carries the Service address instead",
	"flow.original_destination.port":    "the Flow carries the Service port instead",
	"flow.icmp.type":                    "the Flow's Transport has no ICMP block",
	"flow.icmp.code":                    "the Flow's Transport has no ICMP block",
	"flow.icmp.id":                      "the Flow's Transport has no ICMP block",
	"flow.conntrack.id":                 "the Flow has no conntrack block",
	"flow.conntrack.zone":               "the Flow has no conntrack block",
	"flow.conntrack.mark":               "the Flow has no conntrack block",
	"flow.conntrack.labels":             "the Flow has no conntrack block",
	"flow.reporter.node.name":           "flowtel's own (the receiver derives it from the observation domain)",
	"flow.reporter.side":                "flowtel's own",
	"flow.correlation.state":            "flowtel's own",
	"flow.correlation.evicted":          "flowtel's own",
	"(cluster_uid)":                     "the Flow has no cluster",
}

// fields are the mappings in catalogue order; agentFields those agents send.
var fields = build()
var agentFields = agentOnly(fields)

func agentOnly(fs []Field) []Field {
	var out []Field
	for _, m := range fs {
		if m.Agent {
			out = append(out, m)
		}
	}
	return out
}

// Fields returns the mappings, in catalogue order.
func Fields() []Field { return append([]Field(nil), fields...) }

// Put writes r into f (a new Flow): every mapped field, the always-present
// blocks (IP, transport, Kubernetes, both Stats) even when empty, the
// aggregation block only for a record with an Aggregation.
func Put(r *flowrecord.Record, f *pb.Flow) {
	f.Ip, f.Transport, f.K8S = &pb.IP{}, &pb.Transport{}, &pb.Kubernetes{}
	f.Stats, f.ReverseStats = &pb.Stats{}, &pb.Stats{}
	if r.Aggregation != nil {
		f.Aggregation = &pb.Aggregation{StatsFromSource: &pb.Stats{}, ReverseStatsFromSource: &pb.Stats{},
			StatsFromDestination: &pb.Stats{}, ReverseStatsFromDestination: &pb.Stats{}}
	}
	for i := range fields {
		fields[i].Put(r, f)
	}
}

// Put writes the field of r into f.
func (m *Field) Put(r *flowrecord.Record, f *pb.Flow) {
	switch {
	case m.putRecord != nil:
		m.putRecord(r, f)
	case m.ref.Aggregation && r.Aggregation == nil:
	default:
		m.put(m.ref.At(r), f)
	}
}

// Take reads f into r, every mapped field, or with agent only those Antrea's
// agents send; the first value that does not fit its field is the error.
// Each field read is overwritten (zero when f lacks it), so r may be reused
// from Flow to Flow; the aggregation fields are read only from a Flow with
// an aggregation block.
func Take(f *pb.Flow, r *flowrecord.Record, agent bool) error {
	if f == nil {
		return errors.New("empty flow")
	}
	fs := fields
	if agent {
		fs = agentFields
	}
	for i := range fs {
		m := &fs[i]
		if m.take == nil || m.ref.Aggregation && f.GetAggregation() == nil {
			continue
		}
		if err := m.take(f, m.ref.At(r)); err != nil {
			return err
		}
	}
	return nil
}

// mapping is a field's mapping before it meets its catalogue entry.
type mapping struct {
	agent     bool
	put       func(catalogue.Loc, *pb.Flow)
	take      func(*pb.Flow, catalogue.Loc) error
	putRecord func(*flowrecord.Record, *pb.Flow)
}

func build() []Field {
	byName := mappings()
	var out []Field
	for _, cf := range catalogue.Fields() {
		m, ok := byName[cf.Name()]
		if !ok {
			continue
		}
		delete(byName, cf.Name())
		out = append(out, Field{Name: cf.Name(), Agent: m.agent, ref: cf.WireRef(), put: m.put, take: m.take, putRecord: m.putRecord})
	}
	for name := range byName {
		panic("flowpb: a mapping for " + name + ", which is no catalogue field")
	}
	return out
}

// The Flow's blocks, created on write.

func k8s(f *pb.Flow) *pb.Kubernetes {
	if f.K8S == nil {
		f.K8S = &pb.Kubernetes{}
	}
	return f.K8S
}

func ipfix(f *pb.Flow) *pb.IPFIX {
	if f.Ipfix == nil {
		f.Ipfix = &pb.IPFIX{}
	}
	return f.Ipfix
}

func agg(f *pb.Flow) *pb.Aggregation {
	if f.Aggregation == nil {
		f.Aggregation = &pb.Aggregation{}
	}
	return f.Aggregation
}

func stats(s **pb.Stats) *pb.Stats {
	if *s == nil {
		*s = &pb.Stats{}
	}
	return *s
}

// Mappings by kind: get reads the Flow (nil-safe getters), set writes it.

func str(get func(*pb.Flow) string, set func(*pb.Flow, string)) mapping {
	return mapping{agent: true,
		put:  func(l catalogue.Loc, f *pb.Flow) { set(f, *l.String()) },
		take: func(f *pb.Flow, l catalogue.Loc) error { *l.String() = get(f); return nil }}
}

// small is an unsigned field of at most what a T holds (a uint8, an enum,
// a uint16), at of its Loc.
func small[T uint8 | uint16](what string, at func(catalogue.Loc) *T, get func(*pb.Flow) int64, set func(*pb.Flow, uint64)) mapping {
	top := int64(^T(0))
	return mapping{agent: true,
		put: func(l catalogue.Loc, f *pb.Flow) { set(f, uint64(*at(l))) },
		take: func(f *pb.Flow, l catalogue.Loc) error {
			v := get(f)
			if v < 0 || v > top {
				return fmt.Errorf("%s %d out of range", what, v)
			}
			*at(l) = T(v)
			return nil
		}}
}

func u32(get func(*pb.Flow) uint32, set func(*pb.Flow, uint32)) mapping {
	return mapping{agent: true,
		put:  func(l catalogue.Loc, f *pb.Flow) { set(f, *l.Uint32()) },
		take: func(f *pb.Flow, l catalogue.Loc) error { *l.Uint32() = get(f); return nil }}
}

func u64(get func(*pb.Flow) uint64, set func(*pb.Flow, uint64)) mapping {
	return mapping{agent: true,
		put:  func(l catalogue.Loc, f *pb.Flow) { set(f, *l.Uint64()) },
		take: func(f *pb.Flow, l catalogue.Loc) error { *l.Uint64() = get(f); return nil }}
}

func stamp(get func(*pb.Flow) *timestamppb.Timestamp, set func(*pb.Flow, *timestamppb.Timestamp)) mapping {
	return mapping{agent: true,
		put: func(l catalogue.Loc, f *pb.Flow) {
			if t := *l.Time(); !t.IsZero() {
				set(f, timestamppb.New(t))
			}
		},
		take: func(f *pb.Flow, l catalogue.Loc) error {
			*l.Time() = time.Time{}
			if t := get(f); t != nil {
				*l.Time() = t.AsTime()
			}
			return nil
		}}
}

func addr(what string, get func(*pb.Flow) []byte, set func(*pb.Flow, []byte)) mapping {
	return mapping{agent: true,
		put: func(l catalogue.Loc, f *pb.Flow) { set(f, AddrBytes(*l.Addr())) },
		take: func(f *pb.Flow, l catalogue.Loc) error {
			a, err := AddrOf(get(f), what)
			*l.Addr() = a
			return err
		}}
}

func labels(get func(*pb.Flow) *pb.Labels, set func(*pb.Flow, *pb.Labels)) mapping {
	return mapping{
		put: func(l catalogue.Loc, f *pb.Flow) {
			if m := *l.Labels(); m != nil {
				set(f, &pb.Labels{Labels: m})
			}
		},
		take: func(f *pb.Flow, l catalogue.Loc) error {
			*l.Labels() = nil
			if ls := get(f); ls != nil {
				m := ls.GetLabels()
				if m == nil {
					m = map[string]string{}
				}
				*l.Labels() = m
			}
			return nil
		}}
}

func outOnly(m mapping) mapping { m.agent = false; return m }

// counters maps the four counters of a Stats block, named prefix+...
func counters(into map[string]mapping, prefix string, get func(*pb.Flow) *pb.Stats, block func(*pb.Flow) **pb.Stats, agent bool) {
	put := func(name string, g func(*pb.Stats) uint64, s func(*pb.Stats, uint64)) {
		m := u64(func(f *pb.Flow) uint64 { return g(get(f)) }, func(f *pb.Flow, v uint64) { s(stats(block(f)), v) })
		m.agent = agent
		into[prefix+name] = m
	}
	put("packets.total", (*pb.Stats).GetPacketTotalCount, func(s *pb.Stats, v uint64) { s.PacketTotalCount = v })
	put("bytes.total", (*pb.Stats).GetOctetTotalCount, func(s *pb.Stats, v uint64) { s.OctetTotalCount = v })
	put("packets.delta", (*pb.Stats).GetPacketDeltaCount, func(s *pb.Stats, v uint64) { s.PacketDeltaCount = v })
	put("bytes.delta", (*pb.Stats).GetOctetDeltaCount, func(s *pb.Stats, v uint64) { s.OctetDeltaCount = v })
}

// AddrOf reads an address of 4 or 16 bytes; empty or unspecified is not set.
func AddrOf(b []byte, what string) (netip.Addr, error) {
	if len(b) == 0 {
		return netip.Addr{}, nil
	}
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%s: %d bytes, not an IPv4 or IPv6 address", what, len(b))
	}
	if a.IsUnspecified() {
		return netip.Addr{}, nil
	}
	return a, nil
}

// AddrBytes is the address in 4 or 16 bytes, nil when unset.
func AddrBytes(a netip.Addr) []byte {
	if !a.IsValid() {
		return nil
	}
	return a.Unmap().AsSlice()
}

func ipVersion(a netip.Addr) pb.IPVersion {
	switch {
	case !a.IsValid():
		return pb.IPVersion_IP_VERSION_UNSPECIFIED
	case a.Is4() || a.Is4In6():
		return pb.IPVersion_IP_VERSION_4
	default:
		return pb.IPVersion_IP_VERSION_6
	}
}
