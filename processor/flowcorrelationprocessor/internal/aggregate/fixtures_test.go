package aggregate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// t0 is the start of every test connection; ends are offsets from it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

type addrs struct{ src, dst, clusterIP string }

var (
	v4 = addrs{"10.0.0.1", "10.0.0.2", "192.168.0.1"}
	v6 = addrs{"2001:0:3238:dfe1:63::fefb", "2001:0:3238:dfe1:63::fefc", "2001:0:3238:bbbb:63::aaaa"}
)

// base is Antrea's test record: pod1 → pod2, TCP 1234 → 5678, first report
// at 1 s (ESTABLISHED, active timeout) or the updated one at 10 s
// (TIME_WAIT, end of flow).
func base(a addrs, ft flowrecord.FlowType, updated bool) *flowrecord.Record {
	r := &flowrecord.Record{
		Start:    t0,
		Protocol: 6,
		Source: flowrecord.Endpoint{Address: netip.MustParseAddr(a.src), Port: 1234, Kind: flowrecord.EndpointPod,
			Namespace: "ns", PodName: "pod1", NodeName: "node-1"},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr(a.dst), Port: 5678, Kind: flowrecord.EndpointPod,
			Namespace: "ns", PodName: "pod2", NodeName: "node-2"},
		FlowType: ft,
	}
	if updated {
		r.End, r.EndReason, r.TCPState = at(10), flowrecord.EndReasonEndOfFlow, "TIME_WAIT"
	} else {
		r.End, r.EndReason, r.TCPState = at(1), flowrecord.EndReasonActiveTimeout, "ESTABLISHED"
	}
	return r
}

// srcHalf is the source Node's record (it does not know the remote Pod);
// counters as in Antrea's fixtures: 1000 B then 2000 B.
func srcHalf(a addrs, ft flowrecord.FlowType, updated bool, egress flowrecord.RuleAction) *flowrecord.Record {
	r := base(a, ft, updated)
	r.Reporter = flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideSource}
	if ft != flowrecord.FlowTypeIntraNode {
		r.Destination.PodName, r.Destination.Namespace, r.Destination.NodeName = "", "", ""
	} else {
		r.Reporter.Side = flowrecord.SideBoth
	}
	r.Service = flowrecord.Service{PortName: "ns/svc:http", Port: 4739}
	r.OriginalDestinationAddress = netip.MustParseAddr(a.clusterIP)
	r.EgressPolicy.RuleAction = egress
	if updated {
		r.Stats = flowrecord.Counters{PacketTotal: 1000, OctetTotal: 2000, PacketDelta: 500, OctetDelta: 1000}
	} else {
		r.Stats = flowrecord.Counters{PacketTotal: 500, OctetTotal: 1000}
	}
	r.ReverseStats = r.Stats
	return r
}

// dstHalf is the destination Node's record: 1020 B then 2050 B.
func dstHalf(a addrs, ft flowrecord.FlowType, updated bool, ingress flowrecord.RuleAction) *flowrecord.Record {
	r := base(a, ft, updated)
	r.Reporter = flowrecord.Reporter{NodeName: "node-2", Side: flowrecord.SideDestination}
	r.Source.PodName, r.Source.Namespace, r.Source.NodeName = "", "", ""
	r.IngressPolicy.RuleAction = ingress
	if updated {
		r.Stats = flowrecord.Counters{PacketTotal: 1005, OctetTotal: 2050, PacketDelta: 503, OctetDelta: 1030}
	} else {
		r.Stats = flowrecord.Counters{PacketTotal: 502, OctetTotal: 1020}
	}
	r.ReverseStats = r.Stats
	return r
}

// exported collects what a table emits.
type exported struct {
	recs    []flowrecord.Record
	reasons []Reason
}

func (x *exported) emit(r *flowrecord.Record, why Reason) {
	c := *r
	agg := *r.Aggregation
	c.Aggregation = &agg
	x.recs = append(x.recs, c)
	x.reasons = append(x.reasons, why)
}

func (x *exported) take() ([]flowrecord.Record, []Reason) {
	r, w := x.recs, x.reasons
	x.recs, x.reasons = nil, nil
	return r, w
}

func testSettings() Settings {
	return Settings{ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second, PairingTimeout: 180 * time.Second}
}

func newTestTable(t *testing.T) (*Table, *exported) {
	t.Helper()
	return New(testSettings()), &exported{}
}
