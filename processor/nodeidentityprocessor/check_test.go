package nodeidentityprocessor

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// TestCheck: which records node-b's collector may send. The records k8s_flow
// writes on node-b pass, NodePort connections it forwards to a third Node
// among them (the destination half keyed by what reached node-b, and its
// relay leg); a record naming another reporter, another Node on any side it
// claims, no endpoint of node-b where its side says it has one, a relay leg
// of a connection node-b did not relay, or another connection's key does
// not.
func TestCheck(t *testing.T) {
	for name, tc := range checkCases() {
		reason, claim, err := check(tc.r, "node-b", nodeBAddrs)
		require.NoError(t, err, name)
		assert.Equal(t, tc.reason, reason, name)
		assert.Equal(t, tc.want, claim, name)
	}
}

// checkCase is a record node-b's collector sends, and why it may not (the
// reason and the claim check returns; "" when it may).
type checkCase struct {
	r            *flowrecord.Record
	reason, want string
}

// checkCases are TestCheck's records by name.
func checkCases() map[string]checkCase {
	pod := func(addr, node string) flowrecord.Endpoint {
		return flowrecord.Endpoint{Address: netip.MustParseAddr(addr), Port: 8080, Kind: flowrecord.EndpointPod, NodeName: node}
	}
	rec := func(reporter string, side flowrecord.Side, src, dst flowrecord.Endpoint, nodePort bool) *flowrecord.Record {
		r := &flowrecord.Record{Protocol: 6, Source: src, Destination: dst, Reporter: flowrecord.Reporter{NodeName: reporter, Side: side}}
		if nodePort {
			r.OriginalDestinationAddress, r.OriginalDestinationPort = netip.MustParseAddr("192.168.0.2"), 30080
		}
		return r
	}
	keyed := func(r *flowrecord.Record) *flowrecord.Record { r.Key = r.CorrelationKey(); return r }
	withKey := func(r *flowrecord.Record, key string) *flowrecord.Record { r.Key = key; return r }
	podA, podB, podC := pod("10.244.1.10", "node-a"), pod("10.244.2.10", "node-b"), pod("10.244.3.10", "node-c")
	nodeB := flowrecord.Endpoint{Address: netip.MustParseAddr("192.168.0.2"), Kind: flowrecord.EndpointNode, NodeName: "node-b"}
	nodeC := flowrecord.Endpoint{Address: netip.MustParseAddr("192.168.0.3"), Kind: flowrecord.EndpointNode, NodeName: "node-c"}
	external := flowrecord.Endpoint{Address: netip.MustParseAddr("198.51.100.7"), Port: 50000, Kind: flowrecord.EndpointExternal}
	snatBy := func(r *flowrecord.Record, addr string) *flowrecord.Record {
		r.ProxySNATAddress, r.ProxySNATPort = netip.MustParseAddr(addr), 40022
		return r
	}
	masqueraded := func(r *flowrecord.Record) *flowrecord.Record { return snatBy(r, "192.168.0.2") }
	toNodePort := func(r *flowrecord.Record, addr string) *flowrecord.Record {
		r.OriginalDestinationAddress, r.OriginalDestinationPort = netip.MustParseAddr(addr), 30080
		return r
	}
	nodeBAt := func(addr string) flowrecord.Endpoint {
		return flowrecord.Endpoint{Address: netip.MustParseAddr(addr), Kind: flowrecord.EndpointNode, NodeName: "node-b"}
	}
	nodeBGateway := nodeBAt("10.244.2.1")
	return map[string]checkCase{
		// What k8s_flow writes on node-b.
		"source half":                        {keyed(rec("node-b", flowrecord.SideSource, podB, podA, false)), "", ""},
		"source half of node-b itself":       {keyed(rec("node-b", flowrecord.SideSource, nodeB, podA, false)), "", ""},
		"destination half":                   {keyed(rec("node-b", flowrecord.SideDestination, podA, podB, false)), "", ""},
		"destination half, from external":    {keyed(rec("node-b", flowrecord.SideDestination, external, podB, false)), "", ""},
		"destination half of node-b itself":  {keyed(rec("node-b", flowrecord.SideDestination, podA, nodeB, false)), "", ""},
		"intra-Node":                         {keyed(rec("node-b", flowrecord.SideBoth, podB, pod("10.244.2.11", "node-b"), false)), "", ""},
		"from external, ingress Node":        {keyed(masqueraded(rec("node-b", flowrecord.SideSource, external, podC, true))), "", ""},
		"from external to a local endpoint":  {keyed(rec("node-b", flowrecord.SideBoth, external, podB, true)), "", ""},
		"NodePort forwarded to a third Node": {keyed(rec("node-b", flowrecord.SideDestination, podA, podC, true)), "", ""},
		"its relay leg":                      {keyed(masqueraded(rec("node-b", flowrecord.SideRelay, podA, podC, true))), "", ""},
		"relay leg back to the client Node":  {keyed(masqueraded(rec("node-b", flowrecord.SideRelay, podA, pod("10.244.1.11", "node-a"), true))), "", ""},
		"no key sent":                        {rec("node-b", flowrecord.SideSource, podB, podA, false), "", ""},
		"no side, a local endpoint":          {rec("node-b", flowrecord.SideUnknown, podA, podB, false), "", ""},

		// Another reporter.
		"another reporter": {rec("node-a", flowrecord.SideSource, podA, podB, false), "other_node", "node-a"},
		"no reporter":      {rec("", flowrecord.SideSource, podB, podA, false), "other_node", "(none)"},
		// Another Node on a side the record claims.
		"source half of another Node's Pod":         {rec("node-b", flowrecord.SideSource, podA, podB, false), "other_node", "node-a"},
		"source half of another Node":               {rec("node-b", flowrecord.SideSource, nodeC, podA, false), "other_node", "node-c"},
		"destination half of another's Pod":         {rec("node-b", flowrecord.SideDestination, podB, podC, false), "other_node", "node-c"},
		"destination half, another Node":            {rec("node-b", flowrecord.SideDestination, podA, nodeC, false), "other_node", "node-c"},
		"intra-Node, another Node's source":         {rec("node-b", flowrecord.SideBoth, podC, podB, false), "other_node", "node-c"},
		"intra-Node, another Node's destination":    {rec("node-b", flowrecord.SideBoth, podB, podC, false), "other_node", "node-c"},
		"DNATed, a local client, a remote endpoint": {rec("node-b", flowrecord.SideDestination, podB, podC, true), "other_node", "node-c"},
		"no side, between two other Nodes":          {rec("node-b", flowrecord.SideUnknown, podA, podC, false), "other_node", "node-a"},
		// No endpoint of node-b where the side says there is one.
		"source half, an external source":      {rec("node-b", flowrecord.SideSource, external, podA, false), "not_local", ""},
		"source half, a source of no Node":     {rec("node-b", flowrecord.SideSource, flowrecord.Endpoint{Address: podA.Address}, podA, false), "not_local", ""},
		"destination half, to external":        {rec("node-b", flowrecord.SideDestination, podA, external, false), "not_local", ""},
		"no side, no endpoint of any Node":     {rec("node-b", flowrecord.SideUnknown, external, external, false), "not_local", ""},
		"relay leg of a connection not DNATed": {keyed(masqueraded(rec("node-b", flowrecord.SideRelay, podA, podC, false))), "not_local", ""},
		"relay leg of a local client":          {keyed(masqueraded(rec("node-b", flowrecord.SideRelay, podB, podC, true))), "not_local", ""},
		"relay leg to a local endpoint":        {keyed(masqueraded(rec("node-b", flowrecord.SideRelay, podA, podB, true))), "not_local", ""},
		"relay leg of an external client":      {keyed(masqueraded(rec("node-b", flowrecord.SideRelay, external, podC, true))), "not_local", ""},
		"relay leg between two other Nodes":    {rec("node-b", flowrecord.SideRelay, podA, podC, false), "not_local", ""},
		// Another connection's key: a relay leg would fold it away.
		"relay leg with another connection's key":   {withKey(masqueraded(rec("node-b", flowrecord.SideRelay, podA, podC, true)), "6|10.244.1.10:8080|10.244.3.10:8080"), "key_mismatch", ""},
		"source half with another connection's key": {withKey(rec("node-b", flowrecord.SideSource, podB, podA, false), "6|10.244.1.10:8080|10.244.3.10:8080"), "key_mismatch", ""},

		// Addresses used as node-b's own that are another Node's.
		"node-b itself by its podCIDR gateway":            {keyed(rec("node-b", flowrecord.SideSource, nodeBGateway, podA, false)), "", ""},
		"relay leg with another Node's SNAT address":      {keyed(snatBy(rec("node-b", flowrecord.SideRelay, podA, podC, true), "192.168.0.3")), "not_node_address", "192.168.0.3"},
		"relay leg from another Node's NodePort address":  {keyed(masqueraded(toNodePort(rec("node-b", flowrecord.SideRelay, podA, podC, false), "192.168.0.3"))), "not_node_address", "192.168.0.3"},
		"NodePort of another Node's address":              {keyed(toNodePort(rec("node-b", flowrecord.SideDestination, podA, podC, false), "192.168.0.3")), "not_node_address", "192.168.0.3"},
		"NodePort of another Node's address, local Pod":   {keyed(toNodePort(rec("node-b", flowrecord.SideDestination, podA, podB, false), "192.168.0.3")), "not_node_address", "192.168.0.3"},
		"ingress half with another Node's SNAT address":   {keyed(snatBy(rec("node-b", flowrecord.SideSource, external, podC, true), "192.168.0.3")), "not_node_address", "192.168.0.3"},
		"node-b itself at another Node's address":         {keyed(rec("node-b", flowrecord.SideSource, nodeBAt("192.168.0.3"), podA, false)), "not_node_address", "192.168.0.3"},
		"node-b itself as destination at another address": {keyed(rec("node-b", flowrecord.SideDestination, podA, nodeBAt("10.244.3.1"), false)), "not_node_address", "10.244.3.1"},
	}
}

// TestCheckNodesUnknown: while node-b's addresses are not known, a record
// that uses one is not judged (an error: the request comes again), and a
// record that uses none is judged without them.
func TestCheckNodesUnknown(t *testing.T) {
	unknown := func() ([]netip.Addr, error) { return nil, errors.New("not synced") }
	relay := &flowrecord.Record{Protocol: 6,
		Source:                     flowrecord.Endpoint{Address: netip.MustParseAddr("10.244.1.10"), Port: 5000, Kind: flowrecord.EndpointPod, NodeName: "node-a"},
		Destination:                flowrecord.Endpoint{Address: netip.MustParseAddr("10.244.3.10"), Port: 8080, Kind: flowrecord.EndpointPod, NodeName: "node-c"},
		Reporter:                   flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideRelay},
		OriginalDestinationAddress: netip.MustParseAddr("192.168.0.2"), OriginalDestinationPort: 30080,
		ProxySNATAddress: netip.MustParseAddr("192.168.0.2"), ProxySNATPort: 40022}
	_, _, err := check(relay, "node-b", unknown)
	require.Error(t, err)

	half := &flowrecord.Record{Protocol: 6, Source: relay.Destination, Destination: relay.Source,
		Reporter: flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideSource}}
	half.Source.NodeName = "node-b"
	reason, _, err := check(half, "node-b", unknown)
	require.NoError(t, err)
	assert.Empty(t, reason)
}

// nodeBAddrs are node-b's addresses: InternalIP and its podCIDR's gateway.
func nodeBAddrs() ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("10.244.2.1")}, nil
}

// TestCheckCompact: check judges a compact record from what
// compactcodec.Peek keeps of it (checked) as from the whole record: for
// TestCheck's records, and for random ones (every field set, the ones check
// reads drawn among node-b's, other Nodes' and nobody's) whose verdicts span
// check's reasons. A field check reads and checked lacks fails here.
func TestCheckCompact(t *testing.T) {
	judge := func(t *testing.T, r *flowrecord.Record, what string) (verdict [2]string) {
		t.Helper()
		lr := plog.NewLogRecord()
		compactcodec.Encode(r, lr)
		var full, peeked flowrecord.Record
		require.NoError(t, attrcodec.Decode(lr, &full), what)
		require.NoError(t, compactcodec.Peek(lr, &peeked, checked), what)
		reason, claim, err := check(&full, "node-b", nodeBAddrs)
		require.NoError(t, err, what)
		pReason, pClaim, err := check(&peeked, "node-b", nodeBAddrs)
		require.NoError(t, err, what)
		require.Equal(t, [2]string{reason, claim}, [2]string{pReason, pClaim}, "%s: check of the whole record, then of the peeked one", what)
		return [2]string{reason, claim}
	}
	for name, tc := range checkCases() {
		assert.Equal(t, [2]string{tc.reason, tc.want}, judge(t, tc.r, name), name)
	}

	rng := rand.New(rand.NewPCG(44, 3))
	pick := func(s ...string) string { return pickFrom(rng, s...) }
	addr := func() netip.Addr {
		return netip.MustParseAddr(pick("192.168.0.2", "10.244.2.1", "192.168.0.3", "10.244.1.10", "10.244.2.10", "198.51.100.7", "::ffff:192.168.0.2"))
	}
	reasons := map[string]int{}
	for i, r := range flowrecordtest.RandomRecords(t, rng, 3000) {
		r.Reporter.NodeName = pick("node-b", "node-b", "node-b", "node-a")
		r.Reporter.Side = flowrecord.Side(rng.IntN(len(flowrecord.Side(0).Names())))
		r.FlowType = flowrecord.FlowType(rng.IntN(len(flowrecord.FlowType(0).Names())))
		r.Protocol = pickFrom[uint8](rng, 6, 17, 1)
		for _, e := range []*flowrecord.Endpoint{&r.Source, &r.Destination} {
			e.Address, e.Port = addr(), pickFrom[uint16](rng, 8080, 8081)
			e.Kind = flowrecord.EndpointKind(rng.IntN(len(flowrecord.EndpointKind(0).Names())))
			e.NodeName = pick("node-b", "node-a", "node-c", "")
			e.PodName = pick("pod", "")
		}
		r.OriginalDestinationAddress, r.OriginalDestinationPort = addr(), pickFrom[uint16](rng, 8080, 30080, 0)
		r.ProxySNATAddress, r.ProxySNATPort = addr(), 40022
		if rng.IntN(3) == 0 {
			r.ProxySNATAddress = netip.Addr{}
		}
		r.Key = pick(r.CorrelationKey(), r.CorrelationKey(), "", "6|10.244.1.10:8080|10.244.3.10:8080")
		v := judge(t, r, fmt.Sprintf("random record %d", i))
		reasons[v[0]]++
	}
	t.Logf("verdicts of the random records: %v", reasons)
	for _, reason := range []string{"", refusedOtherNode, refusedNotLocal, refusedKeyMismatch, refusedNotNodeAddress} {
		assert.NotZero(t, reasons[reason], "no random record judged %q", reason)
	}
}

// pickFrom is one of s, at random.
func pickFrom[T any](rng *rand.Rand, s ...T) T { return s[rng.IntN(len(s))] }
