package aggregate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// A connection the source's egress policy admits and the destination's
// ingress policy drops, as the two Nodes report it: the source Node's
// conntrack half (SYN_SENT, nothing in reply, the egress policy with Allow)
// and the destination Node's denied record (the dropped SYNs, the ingress
// policy with Drop, end of flow, no TCP state).
func deniedHalves(a addrs) (src, dst *flowrecord.Record) {
	src = srcHalf(a, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionNone)
	src.TCPState = "SYN_SENT"
	src.Stats = flowrecord.Counters{PacketTotal: 3, OctetTotal: 180, PacketDelta: 3, OctetDelta: 180}
	src.ReverseStats = flowrecord.Counters{}
	src.EgressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "ns", Name: "pod1-egress",
		RuleName: "egress-0", RuleAction: flowrecord.RuleActionAllow}

	dst = dstHalf(a, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionNone)
	dst.TCPState, dst.EndReason = "", flowrecord.EndReasonEndOfFlow
	dst.Service, dst.OriginalDestinationAddress = flowrecord.Service{}, src.Destination.Address
	dst.Stats = flowrecord.Counters{PacketTotal: 3, OctetTotal: 180, PacketDelta: 3, OctetDelta: 180}
	dst.ReverseStats = flowrecord.Counters{}
	dst.IngressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "ns", Name: "pod2-ingress",
		RuleAction: flowrecord.RuleActionDrop}
	return src, dst
}

// TestIngressDropPairsWithTheAdmittedEgressInEitherOrder: whichever half
// comes first, and however late the second comes within the pairing
// timeout, the connection is one paired record naming the egress policy
// with Allow and the ingress policy with Drop, in both families.
func TestIngressDropPairsWithTheAdmittedEgressInEitherOrder(t *testing.T) {
	for _, fam := range []struct {
		name string
		a    addrs
	}{{"ipv4", v4}, {"ipv6", v6}} {
		for _, srcFirst := range []bool{true, false} {
			for _, gap := range []int{0, 20} {
				name := fam.name
				if srcFirst {
					name += "/conntrack_half_first"
				} else {
					name += "/denied_record_first"
				}
				t.Run(name+"/gap_"+time.Duration(gap*int(time.Second)).String(), func(t *testing.T) {
					tbl, x := newTestTable(t)
					src, dst := deniedHalves(fam.a)
					first, second := src, dst
					if !srcFirst {
						first, second = dst, src
					}
					tbl.Add(first, at(1), x.emit)
					tbl.Expire(at(1+gap), x.emit)
					assert.Empty(t, x.recs, "an ingress Drop pairs: the first half waits")
					tbl.Add(second, at(1+gap), x.emit)
					recs, _ := x.take()
					require.Len(t, recs, 1)
					r := recs[0]
					assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation)
					assert.Equal(t, src.EgressPolicy, r.EgressPolicy)
					assert.Equal(t, dst.IngressPolicy, r.IngressPolicy)
					assert.Equal(t, "pod1", r.Source.PodName)
					assert.Equal(t, "pod2", r.Destination.PodName)
					assert.Equal(t, uint64(180), r.Stats.OctetDelta, "the deltas count the SYNs once")

					tbl.Expire(at(1+gap+200), x.emit)
					recs, _ = x.take()
					for _, r := range recs {
						assert.Equal(t, flowrecord.CorrelationPaired, r.Correlation, "one record chain, paired")
					}
				})
			}
		}
	}
}

// TestLateEndOfAReportedConnectionStartsNoSecondChain: the source Node's
// conntrack entry of a denied connection (SYN_SENT) is destroyed minutes
// after the gateway exported the pair and forgot it; the end-of-flow record
// it brings has nothing its Node had not reported. It is counted, not
// exported as a second, unpaired record of the connection without its
// denial. An end-of-flow half with something new, or with no counters at
// all (accounting off), is still exported unpaired.
func TestLateEndOfAReportedConnectionStartsNoSecondChain(t *testing.T) {
	tbl, x := newTestTable(t)
	var already int
	tbl.OnAlreadyReported = func() { already++ }
	src, dst := deniedHalves(v4)
	tbl.Add(src, at(1), x.emit)
	tbl.Add(dst, at(2), x.emit)
	tbl.Expire(at(200), x.emit)
	recs, _ := x.take()
	require.Len(t, recs, 1)
	require.Equal(t, 0, tbl.Len(), "forgotten after its inactive timeout")

	end := *src
	end.End, end.EndReason = at(121), flowrecord.EndReasonEndOfFlow
	end.Stats.PacketDelta, end.Stats.OctetDelta = 0, 0
	tbl.Add(&end, at(300), x.emit)
	tbl.Expire(at(300+180), x.emit)
	tbl.Expire(at(300+180+90), x.emit)
	assert.Empty(t, x.recs, "nothing new: no second chain")
	assert.Equal(t, 1, already)
	assert.Equal(t, 0, tbl.Len())
	assert.Equal(t, 0, tbl.Pending())

	for _, c := range []struct {
		name   string
		change func(r *flowrecord.Record)
	}{
		{"with new packets", func(r *flowrecord.Record) { r.Stats.PacketDelta, r.Stats.PacketTotal = 1, 4 }},
		{"without counters", func(r *flowrecord.Record) { r.Stats = flowrecord.Counters{} }},
		{"not its end", func(r *flowrecord.Record) { r.EndReason = flowrecord.EndReasonIdleTimeout }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := end
			c.change(&r)
			tbl.Add(&r, at(1000), x.emit)
			tbl.Expire(at(1000+180), x.emit)
			recs, why := x.take()
			require.Len(t, recs, 1)
			assert.Equal(t, ReasonPairingTimeout, why[0])
			assert.Equal(t, flowrecord.CorrelationUnpaired, recs[0].Correlation)
			tbl.Expire(at(2000), x.emit)
			assert.Equal(t, 1, already)
		})
	}

	// At shutdown too, a pending half that only repeats what went out is
	// not exported.
	tbl.Add(&end, at(3000), x.emit)
	tbl.Flush(at(3001), x.emit)
	assert.Empty(t, x.recs)
	assert.Equal(t, 2, already)
}

// TestDeniedRetriesPairAsOneConnection: the SYN retries of a connection an
// ingress rule drops, as the two Nodes report them when the destination
// Node's denied idle timeout (1 s) passes between retries: the source Node's
// conntrack half (one SYN_SENT entry, one start) and the destination Node's
// denied records, which carry the first SYN's start in every record of the
// chain, totals growing and the new SYNs as deltas. Every record the gateway
// exports is paired, nothing is replaced or dropped as stale, and the
// exported deltas add up to the four SYNs, per side and in common. Also
// when a retry comes after the gateway forgot the pair (its inactive
// timeout): both halves of it pair again.
func TestDeniedRetriesPairAsOneConnection(t *testing.T) {
	for _, fam := range []struct {
		name string
		a    addrs
	}{{"ipv4", v4}, {"ipv6", v6}} {
		for _, c := range []struct {
			name  string
			retry []int // when the SYNs after the first were sent, s
		}{
			{"retries_1s_2s_4s", []int{1, 3, 7}},
			{"a_retry_after_the_inactive_timeout", []int{1, 3, 100}},
		} {
			t.Run(fam.name+"/"+c.name, func(t *testing.T) {
				tbl, x := newTestTable(t)
				var replaced, stale int
				tbl.OnReplaced = func() { replaced++ }
				tbl.OnStale = func() { stale++ }
				src0, dst0 := deniedHalves(fam.a)
				dst0.Start = t0.Add(3 * time.Millisecond) // the destination Node's clock and the wire
				const size = 60
				half := func(r *flowrecord.Record, n, prev int, end time.Time) *flowrecord.Record {
					h := *r
					h.End = end
					h.Stats = flowrecord.Counters{PacketTotal: uint64(n), OctetTotal: uint64(n * size),
						PacketDelta: uint64(n - prev), OctetDelta: uint64((n - prev) * size)}
					return &h
				}
				// Each Node reports the SYNs so far 1 s after the latest:
				// the source Node at its active timeout, the destination
				// Node at its denied idle timeout.
				sends := append([]int{0}, c.retry...)
				for i, sent := range sends {
					n := i + 1
					end := t0.Add(time.Duration(sent) * time.Second)
					now := at(sent + 1)
					tbl.Expire(now, x.emit)
					tbl.Add(half(src0, n, n-1, end), now, x.emit)
					tbl.Add(half(dst0, n, n-1, end.Add(3*time.Millisecond)), now, x.emit)
				}
				tbl.Expire(at(sends[len(sends)-1]+1000), x.emit)
				recs, _ := x.take()
				require.NotEmpty(t, recs)
				var common, fromSrc, fromDst uint64
				for i, r := range recs {
					require.Equal(t, flowrecord.CorrelationPaired, r.Correlation, "record %d", i)
					require.Equal(t, flowrecord.RuleActionDrop, r.IngressPolicy.RuleAction, "record %d", i)
					common += r.Stats.PacketDelta
					fromSrc += r.Aggregation.StatsFromSource.PacketDelta
					fromDst += r.Aggregation.StatsFromDestination.PacketDelta
				}
				n := uint64(len(sends))
				assert.Equal(t, []uint64{n, n, n}, []uint64{common, fromSrc, fromDst}, "the deltas add up to the SYNs, once")
				assert.Zero(t, replaced, "no new connection on the tuple")
				assert.Zero(t, stale)
				assert.Zero(t, tbl.Len())
			})
		}
	}
}
