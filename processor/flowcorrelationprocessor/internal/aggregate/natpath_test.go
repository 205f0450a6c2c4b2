package aggregate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// nodePortHalves are the two halves of a connection from node-1 to node-2's
// NodePort (decision D3): the source Node masquerades a Pod client to its own
// address (a host client already has it) and sends to node-2:30080; node-2
// DNATs that to pod2 and masquerades it again towards the Pod. Neither Node
// sees the other's translation; both key on node-1:port → node-2:30080.
func nodePortHalves(hostClient, ipv6 bool) (src, dst *flowrecord.Record) {
	a, node1, node2, gw2 := v4, netip.MustParseAddr("192.168.77.11"), netip.MustParseAddr("192.168.77.12"), netip.MustParseAddr("10.244.2.1")
	if ipv6 {
		a, node1, node2, gw2 = v6, netip.MustParseAddr("fd00:77::11"), netip.MustParseAddr("fd00:77::12"), netip.MustParseAddr("fd00:244:0:2::1")
	}
	src = base(a, flowrecord.FlowTypeInterNode, false)
	src.Reporter = flowrecord.Reporter{NodeName: "node-1", Side: flowrecord.SideSource}
	src.Destination = flowrecord.Endpoint{Address: node2, Port: 30080, Kind: flowrecord.EndpointNode, NodeName: "node-2"}
	src.OriginalDestinationAddress, src.OriginalDestinationPort = node2, 30080
	if hostClient {
		src.Source = flowrecord.Endpoint{Address: node1, Port: 1234, Kind: flowrecord.EndpointNode, NodeName: "node-1"}
	} else {
		src.ProxySNATAddress, src.ProxySNATPort = node1, 1234
	}
	src.Stats = flowrecord.Counters{PacketTotal: 5, OctetTotal: 3300}

	dst = base(a, flowrecord.FlowTypeInterNode, false)
	dst.Reporter = flowrecord.Reporter{NodeName: "node-2", Side: flowrecord.SideDestination}
	dst.Source = flowrecord.Endpoint{Address: node1, Port: 1234, Kind: flowrecord.EndpointNode, NodeName: "node-1"}
	dst.OriginalDestinationAddress, dst.OriginalDestinationPort = node2, 30080
	dst.Service = flowrecord.Service{PortName: "ns/web:http", UID: "uid-web", Address: node2, Port: 30080}
	dst.ProxySNATAddress, dst.ProxySNATPort = gw2, 1234
	dst.Stats = flowrecord.Counters{PacketTotal: 5, OctetTotal: 3310}
	return src, dst
}

// The two halves of a connection to another Node's NodePort pair into one
// record, in either arrival order: the client as source, the endpoint Pod
// the destination Node chose as destination, the Service and the NAT the
// Nodes did, inter-Node.
func TestNodePortOfAnotherNodePairsInEitherOrder(t *testing.T) {
	for _, client := range []string{"pod", "host"} {
		for _, fam := range []string{"ipv4", "ipv6"} {
			for _, sourceFirst := range []bool{true, false} {
				name := client + "/" + fam + "/" + map[bool]string{true: "source_first", false: "destination_first"}[sourceFirst]
				t.Run(name, func(t *testing.T) {
					src, dst := nodePortHalves(client == "host", fam == "ipv6")
					require.Equal(t, src.CorrelationKey(), dst.CorrelationKey(), "both halves key on the tuple between the Nodes")
					wantSource, wantDestination := src.Source, dst.Destination
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
					assert.Equal(t, wantSource, r.Source, "the client is the source")
					assert.Equal(t, wantDestination, r.Destination, "the endpoint Pod is the destination")
					assert.Equal(t, dst.Service, r.Service)
					assert.Equal(t, dst.OriginalDestinationAddress, r.OriginalDestinationAddress)
					assert.Equal(t, uint16(30080), r.OriginalDestinationPort)
					if client == "pod" {
						assert.Equal(t, src.ProxySNATAddress, r.ProxySNATAddress, "the source Node's masquerade")
						assert.Equal(t, src.ProxySNATPort, r.ProxySNATPort)
					}
					assert.Equal(t, src.CorrelationKey(), r.Key)
					assert.Equal(t, uint64(3300), r.Aggregation.StatsFromSource.OctetTotal)
					assert.Equal(t, uint64(3310), r.Aggregation.StatsFromDestination.OctetTotal)
				})
			}
		}
	}
}

// relayHalves are node-2's relay leg of a NodePort call it sent on to an
// endpoint on node-3 (masqueraded to node-2's address), and node-3's half,
// which sees node-2 as the client.
func relayHalves() (relay, endpoint *flowrecord.Record) {
	node1, node2 := netip.MustParseAddr("192.168.77.11"), netip.MustParseAddr("192.168.77.12")
	relay = base(v4, flowrecord.FlowTypeInterNode, false)
	relay.Reporter = flowrecord.Reporter{NodeName: "node-2", Side: flowrecord.SideRelay}
	relay.Source = flowrecord.Endpoint{Address: node1, Port: 1234, Kind: flowrecord.EndpointNode, NodeName: "node-1"}
	relay.OriginalDestinationAddress, relay.OriginalDestinationPort = node2, 30080
	relay.ProxySNATAddress, relay.ProxySNATPort = node2, 1234
	endpoint = base(v4, flowrecord.FlowTypeInterNode, false)
	endpoint.Reporter = flowrecord.Reporter{NodeName: "node-3", Side: flowrecord.SideDestination}
	endpoint.Source = flowrecord.Endpoint{Address: node2, Port: 1234, Kind: flowrecord.EndpointNode, NodeName: "node-2"}
	return relay, endpoint
}

// The endpoint Node's half of an onward leg pairs with the relay leg and
// is folded away, in either order and at every later export: the
// connection is the first leg's record (TestNodePortOfAnotherNodePairsInEitherOrder).
func TestRelayLegFoldsTheEndpointNodesHalf(t *testing.T) {
	for _, relayFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "relay_first", false: "endpoint_first"}[relayFirst], func(t *testing.T) {
			relay, endpoint := relayHalves()
			require.Equal(t, relay.CorrelationKey(), endpoint.CorrelationKey())
			first, second := relay, endpoint
			if !relayFirst {
				first, second = endpoint, relay
			}
			tbl, x := newTestTable(t)
			var folded []Reason
			tbl.OnRelayFolded = func(why Reason) { folded = append(folded, why) }
			paired := 0
			tbl.OnPaired = func(time.Duration) { paired++ }
			tbl.Add(first, at(1), x.emit)
			tbl.Add(second, at(1), x.emit)
			assert.Equal(t, 1, paired)
			assert.Equal(t, []Reason{ReasonReady}, folded)
			update := *endpoint
			update.End, update.Stats.OctetTotal = at(30), 5000
			tbl.Add(&update, at(30), x.emit)
			tbl.Expire(at(300), x.emit)
			assert.Empty(t, x.recs, "nothing of a relay leg is exported")
			assert.Equal(t, []Reason{ReasonReady, ReasonInactive}, folded)
			assert.Zero(t, tbl.Len())
		})
	}
}

// A relay leg whose endpoint half never comes is folded at its pairing
// timeout (the connection is reported under its first leg); an endpoint
// half whose relay leg never comes is exported unpaired, as any half.
func TestRelayLegAlone(t *testing.T) {
	relay, endpoint := relayHalves()
	tbl, x := newTestTable(t)
	var folded []Reason
	tbl.OnRelayFolded = func(why Reason) { folded = append(folded, why) }
	tbl.Add(relay, at(1), x.emit)
	tbl.Expire(at(1000), x.emit)
	assert.Empty(t, x.recs)
	assert.Equal(t, []Reason{ReasonPairingTimeout}, folded)
	assert.Zero(t, tbl.Pending())

	tbl.Add(endpoint, at(1001), x.emit)
	tbl.Expire(at(2000), x.emit)
	recs, why := x.take()
	require.Len(t, recs, 1)
	assert.Equal(t, []Reason{ReasonPairingTimeout}, why)
	assert.Equal(t, flowrecord.CorrelationUnpaired, recs[0].Correlation)
}
