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
			a.src.node, a.dst.node, a.observationDomain = "node-a", "node-b", tc.domain
			var r flowrecord.Record
			require.Nil(t, toHalf(&a, time.Now(), nil, &r))
			assert.Equal(t, tc.want, r.Reporter)
			assert.Equal(t, "6|10.10.0.5:43512|10.10.1.7:8080", r.Key)
		})
	}
	a := src
	a.dst.node, a.observationDomain = "node-b", 0
	var r flowrecord.Record
	ref := toHalf(&a, time.Now(), nil, &r)
	require.NotNil(t, ref)
	assert.Equal(t, reasonMalformedRecord, ref.reason)
	a.observationDomain = fnv1("node-c")
	ref = toHalf(&a, time.Now(), nil, &r)
	require.NotNil(t, ref, "node-c names neither endpoint and this is no ingress half")
	assert.Equal(t, reasonNoNode, ref.reason)

	// The ingress Node's half of a from-external flow, from an exporter that
	// knows the remote Pod's Node: still the ingress Node's source half.
	ingress, _ := nodePortHalves()
	ingress.dst.node, ingress.dst.pod, ingress.observationDomain = "node-a", "dns", fnv1("node-b")
	require.Nil(t, toHalf(&ingress, time.Now(), nil, &r))
	assert.Equal(t, flowrecord.Reporter{Side: flowrecord.SideSource}, r.Reporter)
	assert.Equal(t, "6|10.10.1.1:61000|10.10.0.9:8080", r.Key)
	assert.Equal(t, fnv1("node-a"), nodeDomain("node-a"), "the test's FNV-1 and the receiver's agree")
}
