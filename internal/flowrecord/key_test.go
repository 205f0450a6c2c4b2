package flowrecord

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func ep(addr string, port uint16) Endpoint {
	return Endpoint{Address: netip.MustParseAddr(addr), Port: port}
}

func TestCorrelationKey(t *testing.T) {
	snat := netip.MustParseAddr("10.10.0.1")
	snat6 := netip.MustParseAddr("fd00:10:10::1")
	tests := []struct {
		name string
		rec  Record
		want string
	}{
		{"tcp ipv4", Record{Protocol: 6, Source: ep("10.10.0.5", 43512), Destination: ep("10.10.1.7", 8080)},
			"6|10.10.0.5:43512|10.10.1.7:8080"},
		{"udp ipv6", Record{Protocol: 17, Source: ep("fd00:10:10::5", 5353), Destination: ep("fd00:10:10:1::7", 53)},
			"17|[fd00:10:10::5]:5353|[fd00:10:10:1::7]:53"},
		{"ipv4-mapped ipv6 is unmapped", Record{Protocol: 6, Source: ep("::ffff:10.10.0.5", 1), Destination: ep("::ffff:10.10.1.7", 2)},
			"6|10.10.0.5:1|10.10.1.7:2"},
		{"icmp has port 0 and its type, code and id", Record{Protocol: 1, Source: ep("10.0.0.1", 0), Destination: ep("10.0.0.2", 0),
			ICMP: ICMP{Type: 8, ID: 4660}}, "1|10.0.0.1:0|10.0.0.2:0|8/0/4660"},
		{"icmpv6 echo", Record{Protocol: 58, Source: ep("fd00::1", 0), Destination: ep("fd00::2", 0), ICMP: ICMP{Type: 128, ID: 7}},
			"58|[fd00::1]:0|[fd00::2]:0|128/0/7"},
		{"the pre-DNAT destination does not matter", Record{Protocol: 6, Source: ep("10.10.0.5", 43512), Destination: ep("10.10.1.7", 8080),
			OriginalDestinationAddress: netip.MustParseAddr("10.96.0.10"), OriginalDestinationPort: 80},
			"6|10.10.0.5:43512|10.10.1.7:8080"},
		{"from-external, ingress Node half (reporter side source): SNAT substitution",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("192.0.2.50", 40000), Destination: ep("10.10.1.7", 80),
				ProxySNATAddress: snat, ProxySNATPort: 61000, Reporter: Reporter{Side: SideSource}},
			"6|10.10.0.1:61000|10.10.1.7:80"},
		{"from-external, ingress Node half from Antrea (no reporter side, no destination Pod): SNAT substitution",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("192.0.2.50", 40000), Destination: ep("10.10.1.7", 80),
				ProxySNATAddress: snat, ProxySNATPort: 61000},
			"6|10.10.0.1:61000|10.10.1.7:80"},
		{"from-external ipv6 ingress half",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("2001:db8::50", 40000), Destination: ep("fd00:10:10:1::7", 80),
				ProxySNATAddress: snat6, ProxySNATPort: 61000, Reporter: Reporter{Side: SideSource}},
			"6|[fd00:10:10::1]:61000|[fd00:10:10:1::7]:80"},
		{"from-external, destination Node half (inter-Node, source = SNAT address): no substitution",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 61000), Destination: ep("10.10.1.7", 80),
				Reporter: Reporter{Side: SideDestination}},
			"6|10.10.0.1:61000|10.10.1.7:80"},
		{"from-external on a single Node (destination Pod local): no substitution",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("192.0.2.50", 40000), Destination: ep("10.10.1.7", 80),
				ProxySNATAddress: snat, ProxySNATPort: 61000, Reporter: Reporter{Side: SideBoth}},
			"6|192.0.2.50:40000|10.10.1.7:80"},
		{"from-external with the destination Pod named by Antrea: no substitution",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("192.0.2.50", 40000),
				Destination:      Endpoint{Address: netip.MustParseAddr("10.10.1.7"), Port: 80, PodName: "web-0"},
				ProxySNATAddress: snat, ProxySNATPort: 61000},
			"6|192.0.2.50:40000|10.10.1.7:80"},
		{"host to ClusterIP masqueraded by the proxy on the source Node (Antrea issue #8260): SNAT substitution",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 41006), Destination: ep("10.10.1.7", 8080),
				ProxySNATAddress: snat, ProxySNATPort: 62000, Reporter: Reporter{Side: SideSource}},
			"6|10.10.0.1:62000|10.10.1.7:8080"},
		{"SNAT seen by the destination Node's own conntrack: no substitution",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 41006), Destination: ep("10.10.1.7", 8080),
				ProxySNATAddress: snat, ProxySNATPort: 62000, Reporter: Reporter{Side: SideDestination}},
			"6|10.10.0.1:41006|10.10.1.7:8080"},
		{"inter-Node record from Antrea (no side) with SNAT: Antrea's rule, no substitution",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 41006), Destination: ep("10.10.1.7", 8080),
				ProxySNATAddress: snat, ProxySNATPort: 62000},
			"6|10.10.0.1:41006|10.10.1.7:8080"},
		{"from-external without SNAT (externalTrafficPolicy Local): no substitution",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("192.0.2.50", 40000), Destination: ep("10.10.1.7", 80),
				Reporter: Reporter{Side: SideSource}},
			"6|192.0.2.50:40000|10.10.1.7:80"},
		{"NodePort of this Node reached from another Node, destination half: the pre-DNAT destination",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.11", 41020), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("192.168.77.12"), OriginalDestinationPort: 30080,
				ProxySNATAddress: netip.MustParseAddr("10.10.1.1"), ProxySNATPort: 41020, Reporter: Reporter{Side: SideDestination}},
			"6|192.168.77.11:41020|192.168.77.12:30080"},
		{"NodePort reached from another Node, ipv6 destination half: the pre-DNAT destination",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("fd00:77::11", 41020), Destination: ep("fd00:10:10:1::7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("fd00:77::12"), OriginalDestinationPort: 30080, Reporter: Reporter{Side: SideDestination}},
			"6|[fd00:77::11]:41020|[fd00:77::12]:30080"},
		{"DNAT on a destination half from Antrea (no side): Antrea's post-DNAT key",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.11", 41020), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("192.168.77.12"), OriginalDestinationPort: 30080},
			"6|192.168.77.11:41020|10.10.1.7:8080"},
		{"DNAT on a source half (ClusterIP translated on the source Node): the post-DNAT destination",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.5", 41021), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("10.96.0.10"), OriginalDestinationPort: 80, Reporter: Reporter{Side: SideSource}},
			"6|10.10.0.5:41021|10.10.1.7:8080"},
		{"an unspecified pre-DNAT destination (IPFIX \"unset\") is no DNAT",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.11", 41020), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.IPv4Unspecified(), OriginalDestinationPort: 0, Reporter: Reporter{Side: SideDestination}},
			"6|192.168.77.11:41020|10.10.1.7:8080"},
		{"from-external with a zero SNAT address (Antrea's IPFIX convention): no substitution",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("192.0.2.50", 40000), Destination: ep("10.10.1.7", 80),
				ProxySNATAddress: netip.IPv4Unspecified(), Reporter: Reporter{Side: SideSource}},
			"6|192.0.2.50:40000|10.10.1.7:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.rec.CorrelationKey())
		})
	}
}

// The two halves of each kind of connection must get the same key.
func TestCorrelationKeyPairsHalves(t *testing.T) {
	pairs := []struct {
		name     string
		src, dst Record
	}{
		{"pod to remote pod via ClusterIP",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.5", 43512), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("10.96.0.10"), OriginalDestinationPort: 80, Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.5", 43512), Destination: ep("10.10.1.7", 8080),
				Reporter: Reporter{Side: SideDestination}}},
		{"node (gateway address) to remote pod, Antrea issue #8260",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 50000), Destination: ep("10.10.1.7", 8080), Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 50000), Destination: ep("10.10.1.7", 8080), Reporter: Reporter{Side: SideDestination}}},
		{"external to NodePort on another node (SNAT to gateway)",
			Record{Protocol: 6, FlowType: FlowTypeFromExternal, Source: ep("192.0.2.50", 40000), Destination: ep("10.10.1.7", 80),
				ProxySNATAddress: netip.MustParseAddr("10.10.0.1"), ProxySNATPort: 61000, Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 61000), Destination: ep("10.10.1.7", 80), Reporter: Reporter{Side: SideDestination}}},
		{"host to remote Pod through a ClusterIP, SNATed by the proxy (Antrea issue #8260)",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 41006), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("10.96.0.10"), OriginalDestinationPort: 80,
				ProxySNATAddress: netip.MustParseAddr("10.10.0.1"), ProxySNATPort: 62000, Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.1", 62000), Destination: ep("10.10.1.7", 8080), Reporter: Reporter{Side: SideDestination}}},
		// A Pod on node-1 (10.10.0.5) calls node-2's NodePort (192.168.77.12:30080):
		// node-1 masquerades it to its own address, node-2 DNATs it to a Pod (and
		// masquerades it again towards the Pod).
		{"pod to the NodePort of another Node: masqueraded by the source Node, DNATed by the destination Node",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("10.10.0.5", 41030), Destination: ep("192.168.77.12", 30080),
				ProxySNATAddress: netip.MustParseAddr("192.168.77.11"), ProxySNATPort: 41030, Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.11", 41030), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("192.168.77.12"), OriginalDestinationPort: 30080,
				ProxySNATAddress: netip.MustParseAddr("10.10.1.1"), ProxySNATPort: 41030, Reporter: Reporter{Side: SideDestination}}},
		{"node (host network) to the NodePort of another Node: DNATed by the destination Node",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.11", 41031), Destination: ep("192.168.77.12", 30080),
				Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.11", 41031), Destination: ep("10.10.1.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("192.168.77.12"), OriginalDestinationPort: 30080, Reporter: Reporter{Side: SideDestination}}},
		{"ipv6 pod to the NodePort of another Node",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("fd00:10:10::5", 41032), Destination: ep("fd00:77::12", 30080),
				ProxySNATAddress: netip.MustParseAddr("fd00:77::11"), ProxySNATPort: 41032, Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("fd00:77::11", 41032), Destination: ep("fd00:10:10:1::7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("fd00:77::12"), OriginalDestinationPort: 30080, Reporter: Reporter{Side: SideDestination}}},
		// The same call when node-2 sends it on to an endpoint on node-3
		// (10.10.2.7), masqueraded to node-2's address: node-2's relay leg and
		// node-3's destination half key on node-2:port → endpoint.
		{"NodePort whose endpoint is on a third Node: the DNAT Node's relay leg and the endpoint Node's half",
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.11", 41033), Destination: ep("10.10.2.7", 8080),
				OriginalDestinationAddress: netip.MustParseAddr("192.168.77.12"), OriginalDestinationPort: 30080,
				ProxySNATAddress: netip.MustParseAddr("192.168.77.12"), ProxySNATPort: 41033, Reporter: Reporter{Side: SideRelay}},
			Record{Protocol: 6, FlowType: FlowTypeInterNode, Source: ep("192.168.77.12", 41033), Destination: ep("10.10.2.7", 8080),
				Reporter: Reporter{Side: SideDestination}}},
		{"ipv6 pod to pod",
			Record{Protocol: 17, FlowType: FlowTypeInterNode, Source: ep("fd00:10:10::5", 5000), Destination: ep("fd00:10:10:1::7", 53), Reporter: Reporter{Side: SideSource}},
			Record{Protocol: 17, FlowType: FlowTypeInterNode, Source: ep("fd00:10:10::5", 5000), Destination: ep("fd00:10:10:1::7", 53), Reporter: Reporter{Side: SideDestination}}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			assert.Equal(t, p.src.CorrelationKey(), p.dst.CorrelationKey())
			assert.Equal(t, KeyHash(p.src.CorrelationKey()), KeyHash(p.dst.CorrelationKey()))
		})
	}
}

func TestCorrelationKeyDistinguishesConnections(t *testing.T) {
	base := Record{Protocol: 6, Source: ep("10.10.0.5", 43512), Destination: ep("10.10.1.7", 8080)}
	variants := []Record{base, base, base, base, base}
	variants[1].Protocol = 17
	variants[2].Source.Port = 43513
	variants[3].Destination.Port = 8081
	variants[4].Source, variants[4].Destination = base.Destination, base.Source // the reverse direction is another connection
	seen := map[string]int{}
	for i, v := range variants {
		k := v.CorrelationKey()
		if j, dup := seen[k]; dup {
			t.Errorf("variant %d has the same key as variant %d: %s", i, j, k)
		}
		seen[k] = i
	}
}

func TestKeyHash(t *testing.T) {
	a := KeyHash("6|10.10.0.5:43512|10.10.1.7:8080")
	assert.False(t, a.IsEmpty())
	assert.Equal(t, a, KeyHash("6|10.10.0.5:43512|10.10.1.7:8080"))
	assert.NotEqual(t, a, KeyHash("6|10.10.0.5:43513|10.10.1.7:8080"))
}
