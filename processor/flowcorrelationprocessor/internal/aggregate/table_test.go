package aggregate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// The cases of Antrea's Flow Aggregator unit tests, re-expressed
// on the typed record, plus our own rules (D1, D4).

func TestInterNodePairsInEitherOrder(t *testing.T) {
	for _, fam := range []struct {
		name string
		a    addrs
	}{{"ipv4", v4}, {"ipv6", v6}} {
		for _, srcFirst := range []bool{true, false} {
			name := fam.name + "/destination_first"
			if srcFirst {
				name = fam.name + "/source_first"
			}
			t.Run(name, func(t *testing.T) {
				tbl, x := newTestTable(t)
				src := srcHalf(fam.a, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionNone)
				dst := dstHalf(fam.a, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionNone)
				first, second := src, dst
				if !srcFirst {
					first, second = dst, src
				}
				tbl.Add(first, at(1), x.emit)
				assert.Empty(t, x.recs, "a half that needs a peer must wait")
				assert.Equal(t, 1, tbl.Pending())

				tbl.Add(second, at(2), x.emit)
				recs, why := x.take()
				require.Len(t, recs, 1)
				assert.Equal(t, []Reason{ReasonReady}, why)
				assert.Equal(t, 0, tbl.Pending())
				r := recs[0]
				assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation)
				assert.Equal(t, flowrecord.SideBoth, r.Reporter.Side)
				assert.Equal(t, src.CorrelationKey(), r.Key)
				assert.Equal(t, "pod1", r.Source.PodName)
				assert.Equal(t, "pod2", r.Destination.PodName)
				assert.Equal(t, "node-1", r.Source.NodeName)
				assert.Equal(t, "node-2", r.Destination.NodeName)
				assert.Equal(t, "ns/svc:http", r.Service.PortName)
				assert.Equal(t, uint16(4739), r.Service.Port)
				assert.Equal(t, netip.MustParseAddr(fam.a.clusterIP), r.OriginalDestinationAddress)
				assert.Equal(t, flowrecord.FlowTypeInterNode, r.FlowType)
				assert.Equal(t, netip.MustParseAddr(fam.a.src), r.Source.Address)
				// Each side's statistics are its own Node's.
				assert.Equal(t, uint64(1000), r.Aggregation.StatsFromSource.OctetTotal)
				assert.Equal(t, uint64(1020), r.Aggregation.StatsFromDestination.OctetTotal)
				assert.Equal(t, at(1), r.Aggregation.EndFromSource)
				assert.Equal(t, at(1), r.Aggregation.EndFromDestination)
			})
		}
	}
}

func TestDenyFlowsDoNotWait(t *testing.T) {
	cases := []struct {
		name     string
		rec      *flowrecord.Record
		peer     *flowrecord.Record // nil: no second half exists
		wantWait bool
	}{
		{"egress drop at source", srcHalf(v4, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionDrop), nil, false},
		{"egress reject at source", srcHalf(v4, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionReject), nil, false},
		{"ingress reject at destination", dstHalf(v4, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionReject), nil, false},
		// Ingress drop: the source Node still committed the connection, so both halves exist.
		{"ingress drop pairs", srcHalf(v4, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionNone),
			dstHalf(v4, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionDrop), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tbl, x := newTestTable(t)
			tbl.Add(c.rec, at(1), x.emit)
			if !c.wantWait {
				recs, why := x.take()
				require.Len(t, recs, 1, "a denied connection has no peer: export at once")
				assert.Equal(t, ReasonReady, why[0])
				assert.Equal(t, flowrecord.CorrelationNotRequired, recs[0].Correlation)
				return
			}
			assert.Empty(t, x.recs)
			tbl.Add(c.peer, at(1), x.emit)
			recs, _ := x.take()
			require.Len(t, recs, 1)
			assert.Equal(t, flowrecord.CorrelationPaired, recs[0].Correlation)
			assert.Equal(t, flowrecord.RuleActionDrop, recs[0].IngressPolicy.RuleAction)
		})
	}
}

func TestSingleNodeFlowsAreReadyAtOnce(t *testing.T) {
	intra := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, flowrecord.RuleActionNone)
	toExt := srcHalf(v4, flowrecord.FlowTypeToExternal, false, flowrecord.RuleActionNone)
	toExt.Destination = flowrecord.Endpoint{Address: netip.MustParseAddr("8.8.8.8"), Port: 53, Kind: flowrecord.EndpointExternal}
	// From-external to a Pod on the ingress Node itself: no SNAT, nothing to pair.
	fromExtLocal := dstHalf(v4, flowrecord.FlowTypeFromExternal, false, flowrecord.RuleActionNone)
	fromExtLocal.Source = flowrecord.Endpoint{Address: netip.MustParseAddr("203.0.113.9"), Port: 40000, Kind: flowrecord.EndpointExternal}
	fromExtLocal.Reporter.Side = flowrecord.SideDestination
	// hostNetwork → Pod on the same Node (Antrea issue #8260, D1): INTRA_NODE, source Node named.
	hostLocal := base(v4, flowrecord.FlowTypeIntraNode, false)
	hostLocal.Source = flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.254"), Port: 1234, Kind: flowrecord.EndpointNode, NodeName: "node-2"}
	hostLocal.Reporter = flowrecord.Reporter{NodeName: "node-2", Side: flowrecord.SideBoth}

	for name, r := range map[string]*flowrecord.Record{
		"intra-node": intra, "to-external": toExt, "from-external single node": fromExtLocal, "host to local pod": hostLocal,
	} {
		t.Run(name, func(t *testing.T) {
			tbl, x := newTestTable(t)
			tbl.Add(r, at(1), x.emit)
			recs, why := x.take()
			require.Len(t, recs, 1)
			assert.Equal(t, ReasonReady, why[0])
			assert.Equal(t, flowrecord.CorrelationNotRequired, recs[0].Correlation)
			a := recs[0].Aggregation
			// One Node saw it all: both sides carry its statistics.
			assert.Equal(t, r.Stats, a.StatsFromSource)
			assert.Equal(t, r.Stats, a.StatsFromDestination)
			assert.Equal(t, r.End, a.EndFromSource)
			assert.Equal(t, r.End, a.EndFromDestination)
			assert.Equal(t, 0, tbl.Pending())
		})
	}
}

// A Node (host network) source talking to a Pod on another Node is an
// INTER_NODE flow with two halves; Antrea misreads its source half as a
// destination half and deletes it (Antrea issue #8260). It must pair.
func TestNodeSourcePairsWithItsPodHalf(t *testing.T) {
	for _, withSide := range []bool{true, false} {
		name := "reporter name only"
		if withSide {
			name = "reporter side"
		}
		t.Run(name, func(t *testing.T) {
			host := flowrecord.Endpoint{Address: netip.MustParseAddr("10.0.0.254"), Port: 33000, Kind: flowrecord.EndpointNode, NodeName: "node-1"}
			srcRec := base(v4, flowrecord.FlowTypeInterNode, false)
			srcRec.Source = host
			srcRec.Reporter = flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideSource}
			srcRec.Stats.OctetTotal = 700
			dstRec := base(v4, flowrecord.FlowTypeInterNode, false)
			dstRec.Source = host
			dstRec.Reporter = flowrecord.Reporter{NodeName: "node-2", Side: flowrecord.SideDestination}
			dstRec.Stats.OctetTotal = 710
			if !withSide {
				srcRec.Reporter.Side, dstRec.Reporter.Side = flowrecord.SideUnknown, flowrecord.SideUnknown
			}
			tbl, x := newTestTable(t)
			tbl.Add(srcRec, at(1), x.emit)
			assert.Empty(t, x.recs, "the source Node's half must wait for the Pod's")
			tbl.Add(dstRec, at(1), x.emit)
			recs, _ := x.take()
			require.Len(t, recs, 1)
			assert.Equal(t, flowrecord.CorrelationPaired, recs[0].Correlation)
			assert.Equal(t, uint64(700), recs[0].Aggregation.StatsFromSource.OctetTotal)
			assert.Equal(t, uint64(710), recs[0].Aggregation.StatsFromDestination.OctetTotal)
			assert.Equal(t, flowrecord.EndpointNode, recs[0].Source.Kind)
		})
	}
}

// fromExternalHalves builds a NodePort connection SNATed on the ingress
// Node (node-1, address 10.0.0.254, SNAT port 61000) to pod2 on node-2.
func fromExternalHalves() (ingress, dest *flowrecord.Record) {
	client := flowrecord.Endpoint{Address: netip.MustParseAddr("203.0.113.9"), Port: 40000, Kind: flowrecord.EndpointExternal}
	snat := netip.MustParseAddr("10.0.0.254")
	ingress = base(v4, flowrecord.FlowTypeFromExternal, false)
	ingress.Source = client
	ingress.Destination.PodName, ingress.Destination.Namespace, ingress.Destination.NodeName = "", "", ""
	ingress.ProxySNATAddress, ingress.ProxySNATPort = snat, 61000
	ingress.OriginalDestinationAddress, ingress.OriginalDestinationPort = snat, 30080
	ingress.Service = flowrecord.Service{PortName: "ns/web:http", Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
	ingress.Reporter = flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideSource}
	ingress.Stats.OctetTotal = 500

	dest = base(v4, flowrecord.FlowTypeInterNode, false)
	dest.Source = flowrecord.Endpoint{Address: snat, Port: 61000, Kind: flowrecord.EndpointNode, NodeName: "node-1"}
	dest.Reporter = flowrecord.Reporter{NodeName: "node-2", Side: flowrecord.SideDestination}
	dest.Stats.OctetTotal = 510
	return ingress, dest
}

func TestFromExternalMergesUnderTheSNATKeyInEitherOrder(t *testing.T) {
	for _, ingressFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "ingress_first", false: "destination_first"}[ingressFirst], func(t *testing.T) {
			ingress, dest := fromExternalHalves()
			require.Equal(t, ingress.CorrelationKey(), dest.CorrelationKey(), "both halves key on the SNAT tuple")
			assert.Equal(t, "6|10.0.0.254:61000|10.0.0.2:5678", ingress.CorrelationKey())
			first, second := ingress, dest
			if !ingressFirst {
				first, second = dest, ingress
			}
			tbl, x := newTestTable(t)
			tbl.Add(first, at(1), x.emit)
			assert.Empty(t, x.recs)
			tbl.Add(second, at(1), x.emit)
			recs, _ := x.take()
			require.Len(t, recs, 1)
			r := recs[0]
			assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation)
			assert.Equal(t, flowrecord.FlowTypeFromExternal, r.FlowType)
			assert.Equal(t, netip.MustParseAddr("203.0.113.9"), r.Source.Address, "the external client is the source")
			assert.Equal(t, uint16(40000), r.Source.Port)
			assert.Equal(t, flowrecord.EndpointExternal, r.Source.Kind)
			assert.Equal(t, "pod2", r.Destination.PodName)
			assert.Equal(t, "node-2", r.Destination.NodeName)
			assert.Equal(t, netip.MustParseAddr("10.96.0.10"), r.Service.Address)
			assert.Equal(t, uint16(80), r.Service.Port)
			assert.Equal(t, "ns/web:http", r.Service.PortName)
			assert.Equal(t, netip.MustParseAddr("10.0.0.254"), r.ProxySNATAddress)
			assert.Equal(t, uint16(61000), r.ProxySNATPort)
			assert.Equal(t, "6|10.0.0.254:61000|10.0.0.2:5678", r.Key)
			assert.Equal(t, uint64(500), r.Aggregation.StatsFromSource.OctetTotal)
			assert.Equal(t, uint64(510), r.Aggregation.StatsFromDestination.OctetTotal)
		})
	}
}

// Antrea issue #8260, case 3: a host → ClusterIP connection masqueraded by the proxy on
// the source Node. The source Node reports the real client (its gateway
// address and port) with the SNAT port; the destination Node sees only the
// SNAT tuple. Both halves key on the SNAT tuple and pair in either order, and
// the paired record names the real client port.
func TestProxySNATedHostHalfPairsInEitherOrder(t *testing.T) {
	for _, sourceFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "source_first", false: "destination_first"}[sourceFirst], func(t *testing.T) {
			gw := netip.MustParseAddr("10.0.0.254")
			src := base(v4, flowrecord.FlowTypeInterNode, false)
			src.Source = flowrecord.Endpoint{Address: gw, Port: 41006, Kind: flowrecord.EndpointNode, NodeName: "node-1"}
			src.Destination.PodName, src.Destination.Namespace, src.Destination.NodeName = "", "", ""
			src.ProxySNATAddress, src.ProxySNATPort = gw, 62000
			src.Service = flowrecord.Service{PortName: "ns/web:http", Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
			src.Reporter = flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideSource}
			dst := base(v4, flowrecord.FlowTypeInterNode, false)
			dst.Source = flowrecord.Endpoint{Address: gw, Port: 62000, Kind: flowrecord.EndpointNode, NodeName: "node-1"}
			dst.Reporter = flowrecord.Reporter{NodeName: "node-2", Side: flowrecord.SideDestination}
			require.Equal(t, src.CorrelationKey(), dst.CorrelationKey())

			first, second := src, dst
			if !sourceFirst {
				first, second = dst, src
			}
			tbl, x := newTestTable(t)
			tbl.Add(first, at(1), x.emit)
			assert.Empty(t, x.recs)
			tbl.Add(second, at(1), x.emit)
			recs, _ := x.take()
			require.Len(t, recs, 1)
			r := recs[0]
			assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation)
			assert.Equal(t, flowrecord.FlowTypeInterNode, r.FlowType)
			assert.Equal(t, uint16(41006), r.Source.Port, "the real client port, not the SNAT port")
			assert.Equal(t, uint16(62000), r.ProxySNATPort)
			assert.Equal(t, "pod2", r.Destination.PodName)
			assert.Equal(t, "ns/web:http", r.Service.PortName)
		})
	}
}

// Antrea's TestAggregateRecordsForInterNodeFlow: the worked example of
// Antrea's aggregation rule (888 and 915 bits/s in its tests), statistics equal to the latest
// records, end reason and TCP state from the latest record.
func TestAggregationNumbers(t *testing.T) {
	for _, fam := range []addrs{v4, v6} {
		tbl, x := newTestTable(t)
		tbl.Add(srcHalf(fam, flowrecord.FlowTypeInterNode, false, 0), at(1), x.emit)
		tbl.Add(dstHalf(fam, flowrecord.FlowTypeInterNode, false, 0), at(1), x.emit)
		recs, _ := x.take()
		require.Len(t, recs, 1)
		tbl.Add(srcHalf(fam, flowrecord.FlowTypeInterNode, true, 0), at(10), x.emit)
		tbl.Add(dstHalf(fam, flowrecord.FlowTypeInterNode, true, 0), at(10), x.emit)
		assert.Empty(t, x.recs, "updates wait for the active timeout")

		tbl.Expire(at(1+60), x.emit)
		recs, why := x.take()
		require.Len(t, recs, 1)
		assert.Equal(t, ReasonActiveTimeout, why[0])
		r := recs[0]
		a := r.Aggregation
		assert.Equal(t, uint64(888), a.ThroughputFromSource)
		assert.Equal(t, uint64(888), a.ReverseThroughputFromSource)
		assert.Equal(t, uint64(915), a.ThroughputFromDestination)
		assert.Equal(t, uint64(915), a.ReverseThroughputFromDestination)
		assert.Equal(t, uint64(915), a.Throughput, "common throughput follows the latest record (the destination's)")
		assert.Equal(t, uint64(915), a.ReverseThroughput)
		assert.Equal(t, flowrecord.Counters{PacketTotal: 1000, OctetTotal: 2000, PacketDelta: 500, OctetDelta: 1000}, a.StatsFromSource)
		assert.Equal(t, flowrecord.Counters{PacketTotal: 1005, OctetTotal: 2050, PacketDelta: 503, OctetDelta: 1030}, a.StatsFromDestination)
		assert.Equal(t, flowrecord.Counters{PacketTotal: 1005, OctetTotal: 2050, PacketDelta: 503, OctetDelta: 1030}, r.Stats)
		assert.Equal(t, at(10), a.EndFromSource)
		assert.Equal(t, at(10), a.EndFromDestination)
		assert.Equal(t, at(10), r.End)
		assert.Equal(t, flowrecord.EndReasonEndOfFlow, r.EndReason)
		assert.Equal(t, "TIME_WAIT", r.TCPState)

		// Deltas and throughputs reset after an export; totals stay.
		tbl.Add(srcHalf(fam, flowrecord.FlowTypeInterNode, true, 0), at(70), x.emit) // a duplicate
		tbl.Expire(at(200), x.emit)
		recs, _ = x.take()
		assert.Empty(t, recs, "a duplicate is no new data: no re-export, connection forgotten at its inactive timeout")
		assert.Equal(t, 0, tbl.Len())
	}
}

func TestFirstRecordThroughputIsOverItsLifetime(t *testing.T) {
	tbl, x := newTestTable(t)
	r := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, 0)
	r.End = t0.Add(4 * time.Second) // 1000 B over 4 s
	tbl.Add(r, at(4), x.emit)
	require.Len(t, x.recs, 1)
	assert.Equal(t, uint64(2000), x.recs[0].Aggregation.Throughput)
	assert.Equal(t, uint64(2000), x.recs[0].Aggregation.ThroughputFromSource)
}

func TestEndOfFlowReasonSticks(t *testing.T) {
	tbl, x := newTestTable(t)
	first := srcHalf(v4, flowrecord.FlowTypeIntraNode, true, 0) // end of flow at 10 s
	tbl.Add(first, at(10), x.emit)
	later := srcHalf(v4, flowrecord.FlowTypeIntraNode, true, 0)
	later.End, later.EndReason, later.Stats.OctetTotal = at(11), flowrecord.EndReasonIdleTimeout, 2100
	tbl.Add(later, at(11), x.emit)
	tbl.Flush(at(12), x.emit)
	recs, _ := x.take()
	require.Len(t, recs, 2)
	assert.Equal(t, flowrecord.EndReasonEndOfFlow, recs[1].EndReason)
}

// Expiry, as Antrea's TestAggregationProcess_ExpireRecords (none / one / two
// expired) and its "no re-export without new data, finally deleted" case.
func TestExpiry(t *testing.T) {
	tbl, x := newTestTable(t)
	a := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, 0)
	b := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, 0)
	b.Source.Port = 1235
	tbl.Add(a, at(0), x.emit)
	tbl.Add(b, at(30), x.emit)
	x.take()

	tbl.Expire(at(59), x.emit)
	assert.Empty(t, x.recs, "none expired")
	assert.Equal(t, 2, tbl.Len())

	// New data for a only.
	a2 := srcHalf(v4, flowrecord.FlowTypeIntraNode, true, 0)
	tbl.Add(a2, at(40), x.emit)
	tbl.Expire(at(60), x.emit)
	recs, why := x.take()
	require.Len(t, recs, 1, "one expired with new data")
	assert.Equal(t, ReasonActiveTimeout, why[0])
	assert.Equal(t, uint16(1234), recs[0].Source.Port)

	// b has had nothing new since its first export: no re-export at its active timeout.
	tbl.Expire(at(90), x.emit)
	assert.Empty(t, x.recs)
	assert.Equal(t, 2, tbl.Len(), "still held until the inactive timeout")

	// Inactive timeouts: b at 30+90, a at 40+90.
	tbl.Expire(at(120), x.emit)
	assert.Equal(t, 1, tbl.Len())
	tbl.Expire(at(130), x.emit)
	assert.Equal(t, 0, tbl.Len(), "both forgotten")
	assert.Empty(t, x.recs, "nothing new to report at the inactive timeout")
}

func TestInactiveExportsLastData(t *testing.T) {
	s := testSettings()
	s.ActiveTimeout = 200 * time.Second // longer than inactive: the last data goes out at the inactive timeout
	tbl, x := New(s), &exported{}
	tbl.Add(srcHalf(v4, flowrecord.FlowTypeIntraNode, false, 0), at(1), x.emit)
	tbl.Add(srcHalf(v4, flowrecord.FlowTypeIntraNode, true, 0), at(10), x.emit)
	x.take()
	tbl.Expire(at(100), x.emit)
	recs, why := x.take()
	require.Len(t, recs, 1)
	assert.Equal(t, ReasonInactive, why[0])
	assert.Equal(t, uint64(2000), recs[0].Stats.OctetTotal)
	assert.Equal(t, 0, tbl.Len())
}

// Antrea deletes a half that never finds its peer, unseen. We export it,
// marked unpaired, at the pairing timeout (D4); a peer that shows up later
// still pairs.
func TestUnpairedHalfIsExportedNotDeleted(t *testing.T) {
	tbl, x := newTestTable(t)
	tbl.Add(srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0), at(0), x.emit)
	tbl.Expire(at(179), x.emit)
	assert.Empty(t, x.recs, "still within the pairing timeout")
	assert.Equal(t, 1, tbl.Pending())

	tbl.Expire(at(180), x.emit)
	recs, why := x.take()
	require.Len(t, recs, 1)
	assert.Equal(t, ReasonPairingTimeout, why[0])
	assert.Equal(t, flowrecord.CorrelationUnpaired, recs[0].Correlation)
	assert.Equal(t, uint64(1000), recs[0].Aggregation.StatsFromSource.OctetTotal)
	assert.Equal(t, "pod1", recs[0].Source.PodName)
	assert.Equal(t, 0, tbl.Len(), "no record for 90 s: forgotten after the export")
	assert.Equal(t, 0, tbl.Pending())
}

func TestLatePeerStillPairsAfterUnpairedExport(t *testing.T) {
	tbl, x := newTestTable(t)
	src := srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
	tbl.Add(src, at(0), x.emit)
	upd := srcHalf(v4, flowrecord.FlowTypeInterNode, true, 0)
	upd.End = at(150)
	tbl.Add(upd, at(150), x.emit) // keeps it alive past the pairing timeout
	tbl.Expire(at(180), x.emit)
	recs, _ := x.take()
	require.Len(t, recs, 1)
	assert.Equal(t, flowrecord.CorrelationUnpaired, recs[0].Correlation)
	require.Equal(t, 1, tbl.Len())

	dst := dstHalf(v4, flowrecord.FlowTypeInterNode, true, 0)
	dst.End = at(185)
	tbl.Add(dst, at(185), x.emit)
	recs, _ = x.take()
	require.Len(t, recs, 1)
	assert.Equal(t, flowrecord.CorrelationPaired, recs[0].Correlation)
	assert.Equal(t, "pod2", recs[0].Destination.PodName)
}

func TestSameSideRecordsDoNotPair(t *testing.T) {
	tbl, x := newTestTable(t)
	tbl.Add(srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0), at(1), x.emit)
	tbl.Add(srcHalf(v4, flowrecord.FlowTypeInterNode, true, 0), at(10), x.emit)
	assert.Empty(t, x.recs, "two reports of the source Node are not a pair")
	assert.Equal(t, 1, tbl.Pending())
}

// max_records: over the bound, the connections with the nearest deadlines
// are exported early (marked evicted), never dropped.
func TestBoundExportsEarlyNeverDrops(t *testing.T) {
	s := testSettings()
	s.MaxRecords = 3
	tbl, x := New(s), &exported{}
	for i := range 5 {
		r := srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
		r.Source.Port = uint16(2000 + i)
		tbl.Add(r, at(i), x.emit)
	}
	assert.Equal(t, 3, tbl.Len())
	recs, why := x.take()
	require.Len(t, recs, 2)
	for i, r := range recs {
		assert.Equal(t, ReasonEvicted, why[i])
		assert.True(t, r.Evicted)
		assert.Equal(t, flowrecord.CorrelationUnpaired, r.Correlation)
		assert.Equal(t, uint16(2000+i), r.Source.Port, "oldest first")
	}
	tbl.Flush(at(10), x.emit)
	recs, why = x.take()
	require.Len(t, recs, 3, "the rest is exported at shutdown")
	for i, r := range recs {
		assert.Equal(t, ReasonFlush, why[i])
		assert.False(t, r.Evicted)
		assert.Equal(t, flowrecord.CorrelationUnpaired, r.Correlation)
	}
	assert.Equal(t, 0, tbl.Len())
	assert.Equal(t, 0, tbl.Pending())
}

func TestFlushExportsOnlyUnreported(t *testing.T) {
	tbl, x := newTestTable(t)
	tbl.Add(srcHalf(v4, flowrecord.FlowTypeIntraNode, false, 0), at(1), x.emit) // exported, nothing new
	other := dstHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
	other.Destination.Port = 9999
	tbl.Add(other, at(1), x.emit) // pending
	x.take()
	tbl.Flush(at(2), x.emit)
	recs, _ := x.take()
	require.Len(t, recs, 1)
	assert.Equal(t, uint16(9999), recs[0].Destination.Port)
	assert.Equal(t, flowrecord.CorrelationUnpaired, recs[0].Correlation)
}

func TestOnPairedReportsTheWait(t *testing.T) {
	tbl, x := newTestTable(t)
	var waits []time.Duration
	tbl.OnPaired = func(d time.Duration) { waits = append(waits, d) }
	tbl.Add(srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0), at(1), x.emit)
	tbl.Add(dstHalf(v4, flowrecord.FlowTypeInterNode, false, 0), at(4), x.emit)
	assert.Equal(t, []time.Duration{3 * time.Second}, waits)
}

func TestKeyFromRecordWins(t *testing.T) {
	tbl, x := newTestTable(t)
	a := srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
	b := dstHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
	b.Destination.Port = 1 // a different tuple, but the node side keyed it the same
	a.Key, b.Key = "k", "k"
	tbl.Add(a, at(1), x.emit)
	tbl.Add(b, at(1), x.emit)
	require.Len(t, x.recs, 1)
	assert.Equal(t, "k", x.recs[0].Key)
}
