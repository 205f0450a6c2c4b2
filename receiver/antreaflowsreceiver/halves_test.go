package antreaflowsreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestTwoNodesToldApartByDomain: an exporter that names both endpoints'
// Nodes (flowtel's ipfix exporter in the agent layout knows remote Pods) is
// the Node whose FNV-1 is the observation domain, as Antrea's agents set it;
// another domain is a Node the record does not name; without a domain two
// names are refused.
func TestTwoNodesToldApartByDomain(t *testing.T) {
	src, dst := interNodeHalves(43512)
	for _, tc := range []struct {
		name   string
		a      agentRecord
		domain uint32
		want   flowrecord.Reporter
	}{
		{"source", src, fnv1("node-a"), flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideSource}},
		{"destination", dst, fnv1("node-b"), flowrecord.Reporter{NodeName: "node-b", Side: flowrecord.SideDestination}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			a.Source.NodeName, a.Destination.NodeName, a.domain = "node-a", "node-b", tc.domain
			require.Nil(t, toHalf(&a, time.Now(), nil))
			assert.Equal(t, tc.want, a.Reporter)
			assert.Equal(t, "6|10.10.0.5:43512|10.10.1.7:8080", a.Key)
		})
	}
	a := src
	a.Destination.NodeName, a.domain = "node-b", 0
	ref := toHalf(&a, time.Now(), nil)
	require.NotNil(t, ref)
	assert.Equal(t, reasonMalformedRecord, ref.reason)
	a.domain = fnv1("node-c")
	ref = toHalf(&a, time.Now(), nil)
	require.NotNil(t, ref, "node-c names neither endpoint and this is no ingress half")
	assert.Equal(t, reasonNoNode, ref.reason)

	// The ingress Node's half of a from-external flow, from an exporter that
	// knows the remote Pod's Node: still the ingress Node's source half.
	ingress, _ := nodePortHalves()
	ingress.Destination.NodeName, ingress.Destination.PodName, ingress.domain = "node-a", "dns", fnv1("node-b")
	require.Nil(t, toHalf(&ingress, time.Now(), nil))
	assert.Equal(t, flowrecord.Reporter{Side: flowrecord.SideSource}, ingress.Reporter)
	assert.Equal(t, "6|10.10.1.1:61000|10.10.0.9:8080", ingress.Key)
	assert.Equal(t, fnv1("node-a"), nodeDomain("node-a"), "the test's FNV-1 and the receiver's agree")
}
