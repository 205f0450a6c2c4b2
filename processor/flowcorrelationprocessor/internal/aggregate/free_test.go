package aggregate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// richConnection is an IPv6 connection whose halves fill nearly every field
// an entry keeps: labels, policies, Egress, Service, conntrack data,
// reverse counters, and a peer start.
func richConnection() (src, dst *flowrecord.Record) {
	src = srcHalf(v6, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionAllow)
	dst = dstHalf(v6, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionAllow)
	src.Source.PodLabels = map[string]string{"app": "web", "tier": "front"}
	src.Source.PodUID, src.Source.WorkloadKind, src.Source.WorkloadName = "uid-web", "Deployment", "web"
	src.EgressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "ns", Name: "out", RuleAction: flowrecord.RuleActionAllow}
	src.Egress = flowrecord.Egress{Name: "egress-a", UID: "uid-egress", Address: netip.MustParseAddr("192.0.2.9"), NodeName: "node-1"}
	src.Service.UID, src.Service.Address = "uid-svc", netip.MustParseAddr(v6.clusterIP)
	src.Conntrack = flowrecord.Conntrack{ID: 7, Zone: 65520, Mark: 0x21}
	dst.Destination.PodLabels = map[string]string{"app": "api"}
	dst.Destination.PodUID, dst.Destination.WorkloadKind, dst.Destination.WorkloadName = "uid-api", "StatefulSet", "api"
	dst.IngressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "ns", Name: "in", RuleName: "r1", RuleAction: flowrecord.RuleActionAllow}
	dst.Start = t0.Add(-time.Second) // the other Node's clock: a peer start
	src.Key, dst.Key = src.CorrelationKey(), dst.CorrelationKey()
	return src, dst
}

// sparseHalves are IPv4 records that leave most fields empty: a pending
// source half (exported unpaired later) and an intra-Node record that
// needs no pairing. A reused entry that kept anything of a previous
// connection would show it in their exports.
func sparseHalves() []*flowrecord.Record {
	pending := base(v4, flowrecord.FlowTypeInterNode, false)
	pending.Destination.PodName, pending.Destination.Namespace, pending.Destination.NodeName = "", "", ""
	pending.Reporter = flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideSource}
	pending.Stats = flowrecord.Counters{PacketTotal: 3, OctetTotal: 300}
	local := base(v4, flowrecord.FlowTypeIntraNode, false)
	local.Source.Port = 4321
	local.Reporter = flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideBoth}
	for _, r := range []*flowrecord.Record{pending, local} {
		r.Key = r.CorrelationKey()
	}
	return []*flowrecord.Record{pending, local}
}

// runSparse adds the sparse records to tbl at sec and runs the table
// through their exports until they are forgotten, returning what it emitted.
func runSparse(tbl *Table, sec int) ([]flowrecord.Record, []Reason) {
	x := &exported{}
	for _, r := range sparseHalves() {
		tbl.Add(r, at(sec), x.emit)
	}
	tbl.Expire(at(sec+200), x.emit) // pairing timeout, then forgotten
	tbl.Expire(at(sec+400), x.emit)
	return x.take()
}

// dirty makes entries of tbl hold the rich connection's fields and then be
// forgotten, in the way named: expired, replaced on its tuple, evicted.
func dirty(t *testing.T, tbl *Table, how string) int {
	t.Helper()
	x := &exported{}
	src, dst := richConnection()
	tbl.Add(src, at(1), x.emit)
	tbl.Add(dst, at(2), x.emit)
	require.Len(t, x.recs, 1, "the rich connection pairs")
	require.NotNil(t, x.recs[0].Source.PodLabels)
	switch how {
	case "expired":
		tbl.Expire(at(500), x.emit)
		return 500
	case "replaced":
		next := *src
		next.Start = t0.Add(time.Minute) // a new connection on the same tuple
		next.End = at(70)
		tbl.Add(&next, at(70), x.emit)
		tbl.Expire(at(600), x.emit) // the new one, pending, is exported unpaired and forgotten
		return 600
	case "evicted":
		tbl.s.MaxRecords = 1
		other := *src
		other.Source.Port = 999
		other.Key = other.CorrelationKey()
		tbl.Add(&other, at(3), x.emit) // evicts the rich one
		tbl.Expire(at(600), x.emit)
		tbl.s.MaxRecords = 0
		return 600
	}
	t.Fatalf("unknown way %q", how)
	return 0
}

// A recycled entry must not carry anything of the connection it held into
// the next one: what a table with recycled entries exports for a new
// connection is what a new table exports.
func TestRecycledEntryLeaksNothing(t *testing.T) {
	for _, how := range []string{"expired", "replaced", "evicted"} {
		t.Run(how, func(t *testing.T) {
			used := New(testSettings())
			sec := dirty(t, used, how)
			require.Zero(t, used.Len())
			free := len(used.free.items)
			require.NotZero(t, free, "forgotten entries are kept for reuse")
			for _, e := range used.free.items {
				require.Equal(t, entry{}, *e, "a free entry is zeroed")
			}
			recycled := used.free.items[free-1]

			x := &exported{}
			recs := sparseHalves()
			for _, r := range recs {
				used.Add(r, at(sec), x.emit)
			}
			assert.Same(t, recycled, used.entries[recs[0].Key], "the first insert reuses a free entry")
			used.Expire(at(sec+200), x.emit)
			used.Expire(at(sec+400), x.emit)
			usedRecs, usedWhy := x.take()
			wantRecs, wantWhy := runSparse(New(testSettings()), sec)
			require.NotEmpty(t, wantRecs)
			assert.Equal(t, wantRecs, usedRecs)
			assert.Equal(t, wantWhy, usedWhy)
			for _, r := range usedRecs {
				assert.Nil(t, r.Source.PodLabels)
				assert.Nil(t, r.Destination.PodLabels)
				assert.Empty(t, r.Egress.Name)
				assert.Empty(t, r.IngressPolicy.Name)
				assert.Zero(t, r.Conntrack)
			}
		})
	}
}

// Free entries are bounded by the churn between two Expire calls: those no
// insert took during a whole interval are let go at the next Expire.
func TestFreeEntriesBoundedByChurn(t *testing.T) {
	tbl, x := newTestTable(t)
	const n = 10
	for i := range n {
		r := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, flowrecord.RuleActionNone)
		r.Source.Port = uint16(1000 + i)
		r.Key = r.CorrelationKey()
		tbl.Add(r, at(1), x.emit)
	}
	tbl.Expire(at(200), x.emit)
	require.Zero(t, tbl.Len())
	require.Len(t, tbl.free.items, n, "every forgotten entry is kept")

	for i := range 3 { // the next interval needs three of them
		r := srcHalf(v4, flowrecord.FlowTypeIntraNode, false, flowrecord.RuleActionNone)
		r.Source.Port = uint16(2000 + i)
		r.Key = r.CorrelationKey()
		tbl.Add(r, at(201), x.emit)
	}
	require.Len(t, tbl.free.items, n-3)
	tbl.Expire(at(202), x.emit) // nothing due: the seven unused are let go
	assert.Empty(t, tbl.free.items)
	tbl.Expire(at(400), x.emit) // the three are forgotten and kept
	assert.Len(t, tbl.free.items, 3)
	tbl.Expire(at(401), x.emit)
	assert.Empty(t, tbl.free.items, "not needed for a whole interval")
}

// With RecycleLabels, a forgotten connection's small label maps come back
// empty from TakeLabels (large ones are left to the collector), and are
// let go when not taken for a whole interval; without, the caller's maps
// are never touched.
func TestForgottenLabelMapsRecycled(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		s := testSettings()
		s.RecycleLabels = recycle
		tbl := New(s)
		x := &exported{}
		src, dst := richConnection()
		big := map[string]string{}
		for i := range maxRecycledLabels + 1 {
			big[string(rune('a'+i))] = "v"
		}
		dst.Destination.PodLabels = big
		small := src.Source.PodLabels
		tbl.Add(src, at(1), x.emit)
		tbl.Add(dst, at(2), x.emit)
		tbl.Expire(at(500), x.emit)
		require.Zero(t, tbl.Len())
		if !recycle {
			assert.Nil(t, tbl.TakeLabels())
			assert.Equal(t, map[string]string{"app": "web", "tier": "front"}, small, "the caller's map is left alone")
			assert.Len(t, big, maxRecycledLabels+1)
			continue
		}
		m := tbl.TakeLabels()
		require.NotNil(t, m)
		assert.Empty(t, m)
		assert.Empty(t, small, "the map taken is the connection's, emptied")
		assert.Nil(t, tbl.TakeLabels(), "the large map is not kept")
		assert.Len(t, big, maxRecycledLabels+1)

		src2, dst2 := richConnection()
		tbl.Add(src2, at(501), x.emit)
		tbl.Add(dst2, at(502), x.emit)
		tbl.Expire(at(1000), x.emit)
		tbl.Expire(at(1001), x.emit) // not taken during the interval: let go
		assert.Nil(t, tbl.TakeLabels())
	}
}
