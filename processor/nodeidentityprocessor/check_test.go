package nodeidentityprocessor

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestOtherNode: which records node-b's collector may send. The records
// k8s_flow writes on node-b pass, NodePort connections it forwards to a third
// Node among them (the destination half keyed by what reached node-b, and
// its relay leg); a record naming another reporter, or another Node on the
// reporter's side, does not.
func TestOtherNode(t *testing.T) {
	ep := func(addr, node string) flowrecord.Endpoint {
		return flowrecord.Endpoint{Address: netip.MustParseAddr(addr), Port: 8080, NodeName: node}
	}
	rec := func(reporter string, side flowrecord.Side, src, dst flowrecord.Endpoint, nodePort bool) *flowrecord.Record {
		r := &flowrecord.Record{Source: src, Destination: dst, Reporter: flowrecord.Reporter{NodeName: reporter, Side: side}}
		if nodePort {
			r.OriginalDestinationAddress, r.OriginalDestinationPort = netip.MustParseAddr("192.168.0.2"), 30080
		}
		return r
	}
	podA, podB, podC := ep("10.244.1.10", "node-a"), ep("10.244.2.10", "node-b"), ep("10.244.3.10", "node-c")
	external := ep("198.51.100.7", "")
	for name, tc := range map[string]struct {
		r    *flowrecord.Record
		want string
	}{
		"source half":                         {rec("node-b", flowrecord.SideSource, podB, podA, false), ""},
		"destination half":                    {rec("node-b", flowrecord.SideDestination, podA, podB, false), ""},
		"intra-Node":                          {rec("node-b", flowrecord.SideBoth, podB, ep("10.244.2.11", "node-b"), false), ""},
		"from external, ingress Node":         {rec("node-b", flowrecord.SideSource, external, podC, true), ""},
		"NodePort forwarded to a third Node":  {rec("node-b", flowrecord.SideDestination, podA, podC, true), ""},
		"its relay leg":                       {rec("node-b", flowrecord.SideRelay, podA, podC, true), ""},
		"another reporter":                    {rec("node-a", flowrecord.SideSource, podA, podB, false), "node-a"},
		"no reporter":                         {rec("", flowrecord.SideSource, podB, podA, false), "(none)"},
		"source half of another Node's Pod":   {rec("node-b", flowrecord.SideSource, podA, podB, false), "node-a"},
		"destination half of another's Pod":   {rec("node-b", flowrecord.SideDestination, podB, podC, false), "node-c"},
		"intra-Node, another Node's endpoint": {rec("node-b", flowrecord.SideBoth, podC, podB, false), "node-c"},
	} {
		assert.Equal(t, tc.want, otherNode(tc.r, "node-b"), name)
	}
}
