package k8sflowprocessor

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// ep is the expected identity of one endpoint.
type ep struct {
	kind      flowrecord.EndpointKind
	pod, node string
}

var (
	pod      = func(name, node string) ep { return ep{flowrecord.EndpointPod, name, node} }
	nodeEP   = func(node string) ep { return ep{flowrecord.EndpointNode, "", node} }
	external = ep{kind: flowrecord.EndpointExternal}
)

// flowCase is one connection as a Node's receiver reports it, and what the
// processor on that Node must make of it.
type flowCase struct {
	name     string
	reporter string // the Node whose collector sees the connection
	src, dst string // address:port, post-DNAT
	origDst  string // pre-DNAT destination; "" = no DNAT
	snat     string // proxy SNAT address:port; "" = none
	proto    uint8  // 0 = TCP

	drop     string // expected drop reason, or "" for a record
	flowType flowrecord.FlowType
	side     flowrecord.Side
	srcEP    ep
	dstEP    ep
	service  string
	key      string // expected correlation key; "" = not checked beyond CorrelationKey()
}

func hp(ip string, port int) string { return netip.AddrPortFrom(addr(ip), uint16(port)).String() }

// antreaFindFlowTypeCases re-expresses every case of Antrea's
// TestDestination_findFlowType (Antrea's unit test of its flow type rule) with flowtel's expected result.
// Where flowtel differs, the case name says why.
func antreaFindFlowTypeCases(f family) []flowCase {
	const intra, inter, toExt, fromExt = flowrecord.FlowTypeIntraNode, flowrecord.FlowTypeInterNode, flowrecord.FlowTypeToExternal, flowrecord.FlowTypeFromExternal
	const both, source, dest = flowrecord.SideBoth, flowrecord.SideSource, flowrecord.SideDestination
	webA, client, dbB := pod("web-a", "node-a"), pod("client", "node-a"), pod("db-b", "node-b")
	return []flowCase{
		{name: "NetworkPolicyOnly both Pods local ⇒ 1 (same)", reporter: "node-a",
			src: hp(f.client, 40000), dst: hp(f.webA, 80), flowType: intra, side: both, srcEP: client, dstEP: webA},
		{name: "NetworkPolicyOnly one Pod remote ⇒ 2 (same)", reporter: "node-a",
			src: hp(f.client, 40001), dst: hp(f.dbB, 5432), flowType: inter, side: source, srcEP: client, dstEP: dbB},
		{name: "no NodeRouteController ⇒ 0; differs: flowtel always has the Node index, local Pod → local Pod ⇒ 1", reporter: "node-a",
			src: hp(f.webA, 40002), dst: hp(f.client, 9000), flowType: intra, side: both, srcEP: webA, dstEP: client},
		{name: "Pod → local Pod ⇒ 1 (same)", reporter: "node-a",
			src: hp(f.client, 40003), dst: hp(f.webA, 80), flowType: intra, side: both, srcEP: client, dstEP: webA},
		{name: "Pod → remote Pod ⇒ 2 (same), source Node half", reporter: "node-a",
			src: hp(f.client, 40004), dst: hp(f.dbB, 5432), flowType: inter, side: source, srcEP: client, dstEP: dbB},
		{name: "Pod → remote Pod ⇒ 2 (same), destination Node half", reporter: "node-b",
			src: hp(f.client, 40004), dst: hp(f.dbB, 5432), flowType: inter, side: dest, srcEP: pod("", "node-a"), dstEP: dbB},
		{name: "Pod → 8.8.8.8 ⇒ 3 (same)", reporter: "node-a",
			src: hp(f.client, 40005), dst: hp(f.external, 53), flowType: toExt, side: source, srcEP: client, dstEP: external},
		{name: "destination is the local gateway ⇒ Unsupported; differs: a Node endpoint (D1) ⇒ 1", reporter: "node-a",
			src: hp(f.client, 40006), dst: hp(f.gwA, 10250), flowType: intra, side: both, srcEP: client, dstEP: nodeEP("node-a")},
		{name: "destination is a remote gateway ⇒ Unsupported; differs: a Node endpoint (D1) ⇒ 2", reporter: "node-a",
			src: hp(f.client, 40007), dst: hp(f.gwB, 10250), flowType: inter, side: source, srcEP: client, dstEP: nodeEP("node-b")},
		{name: "source is the local gateway, destination Pod local ⇒ 2; differs: host → local Pod is the Node's own traffic ⇒ 1 (Antrea issue #8260)", reporter: "node-a",
			src: hp(f.gwA, 47968), dst: hp(f.webA, 80), flowType: intra, side: both, srcEP: nodeEP("node-a"), dstEP: webA},
		{name: "source is a remote gateway, destination Pod local ⇒ 2 (same), destination half", reporter: "node-a",
			src: hp(f.gwB, 37148), dst: hp(f.webA, 80), flowType: inter, side: dest, srcEP: nodeEP("node-b"), dstEP: webA},
		{name: "source is the gateway without destination Pod ⇒ Unsupported; differs: the source half of host → remote Pod is reported (D2) ⇒ 2", reporter: "node-a",
			src: hp(f.gwA, 37149), dst: hp(f.dbB, 5432), flowType: inter, side: source, srcEP: nodeEP("node-a"), dstEP: dbB},
		{name: "external → Pod ⇒ 4 (same)", reporter: "node-a",
			src: hp(f.extSrc, 50000), dst: hp(f.webA, 80), flowType: fromExt, side: dest, srcEP: external, dstEP: webA},
		{name: "Node host IP → Pod ⇒ 4; differs: the Node is in the cluster (D1) ⇒ 1", reporter: "node-a",
			src: hp(f.nodeA, 40950), dst: hp(f.webA, 80), flowType: intra, side: both, srcEP: nodeEP("node-a"), dstEP: webA},
		{name: "external → external ⇒ Unsupported (same: not reported), dropped and counted", reporter: "node-a",
			src: hp(f.extSrc, 50001), dst: hp(f.external, 443), drop: reasonNoLocalEndpoint},
	}
}

// issue8260Cases are the three cases of Antrea issue #8260 (host-network → Pod),
// observed the way the issue's live cluster showed them.
func issue8260Cases(f family) []flowCase {
	const intra, inter = flowrecord.FlowTypeIntraNode, flowrecord.FlowTypeInterNode
	webA := pod("web-a", "node-a")
	return []flowCase{
		{name: "Antrea issue #8260 #1 Node → local Pod", reporter: "node-a",
			src: hp(f.gwA, 47968), dst: hp(f.webA, 80), flowType: intra, side: flowrecord.SideBoth, srcEP: nodeEP("node-a"), dstEP: webA},
		{name: "Antrea issue #8260 #2 Node → remote Pod, source Node", reporter: "node-b",
			src: hp(f.gwB, 37148), dst: hp(f.webA, 80), flowType: inter, side: flowrecord.SideSource, srcEP: nodeEP("node-b"), dstEP: pod("", "node-a")},
		{name: "Antrea issue #8260 #2 Node → remote Pod, destination Node", reporter: "node-a",
			src: hp(f.gwB, 37148), dst: hp(f.webA, 80), flowType: inter, side: flowrecord.SideDestination, srcEP: nodeEP("node-b"), dstEP: webA},
		{name: "Antrea issue #8260 #3 Node → ClusterIP → Pod", reporter: "node-a",
			src: hp(f.nodeA, 40950), origDst: hp(f.clusterIP, 80), dst: hp(f.webA, 80), snat: hp(f.gwA, 12254),
			flowType: intra, side: flowrecord.SideBoth, srcEP: nodeEP("node-a"), dstEP: webA, service: "default/web:http"},
	}
}

// moreCases cover the rest of D1/D2: ingress Nodes, remote-only
// connections, Services on every kind of front end.
func moreCases(f family) []flowCase {
	const inter, fromExt = flowrecord.FlowTypeInterNode, flowrecord.FlowTypeFromExternal
	webA, client := pod("web-a", "node-a"), pod("client", "node-a")
	return []flowCase{
		{name: "remote Pod → remote Pod: no local endpoint, dropped", reporter: "node-a",
			src: hp(f.dbB, 40000), dst: hp(f.gwB, 80), drop: reasonNoLocalEndpoint},
		{name: "external → NodePort on this Node → remote Pod: ingress Node reports the source side", reporter: "node-b",
			src: hp(f.extSrc, 50002), origDst: hp(f.nodeB, 30080), dst: hp(f.webA, 80), snat: hp(f.gwB, 61000),
			flowType: fromExt, side: flowrecord.SideSource, srcEP: external, dstEP: pod("", "node-a"), service: "default/web:http"},
		{name: "…its destination-Node half: source SNATed to the ingress Node's gateway", reporter: "node-a",
			src: hp(f.gwB, 61000), dst: hp(f.webA, 80),
			flowType: inter, side: flowrecord.SideDestination, srcEP: nodeEP("node-b"), dstEP: webA},
		{name: "external → NodePort on this Node → local Pod: both sides", reporter: "node-a",
			src: hp(f.extSrc, 50003), origDst: hp(f.nodeA, 30080), dst: hp(f.webA, 80), snat: hp(f.gwA, 61001),
			flowType: fromExt, side: flowrecord.SideBoth, srcEP: external, dstEP: webA, service: "default/web:http"},
		{name: "local Pod → ClusterIP → remote Pod", reporter: "node-a",
			src: hp(f.client, 40010), origDst: hp(f.clusterIP, 80), dst: hp(f.dbB, 80),
			flowType: inter, side: flowrecord.SideSource, srcEP: client, dstEP: pod("db-b", "node-b"), service: "default/web:http"},
		{name: "local Pod → NodePort on a remote Node's address, DNATed locally", reporter: "node-a",
			src: hp(f.client, 40011), origDst: hp(f.nodeB, 30080), dst: hp(f.webA, 80),
			flowType: flowrecord.FlowTypeIntraNode, side: flowrecord.SideBoth, srcEP: client, dstEP: webA, service: "default/web:http"},
		{name: "remote Node address, no DNAT, NodePort number: not a Service", reporter: "node-a",
			src: hp(f.client, 40012), dst: hp(f.nodeB, 30080),
			flowType: inter, side: flowrecord.SideSource, srcEP: client, dstEP: nodeEP("node-b")},
	}
}

// nodePortCases are connections to the NodePort of another Node (decision D3):
// the source Node masquerades a Pod's connection to its own address, the
// destination Node DNATs it to an endpoint. Each Node keys its half by the
// tuple that crosses between them, node-a's address → node-b's NodePort, so
// the gateway pairs them into one record.
func nodePortCases(f family) []flowCase {
	const inter, source, dest = flowrecord.FlowTypeInterNode, flowrecord.SideSource, flowrecord.SideDestination
	client, dbB := pod("client", "node-a"), pod("db-b", "node-b")
	crossing := func(port int) string { return "6|" + hp(f.nodeA, port) + "|" + hp(f.nodeB, 30080) }
	return []flowCase{
		{name: "Pod → NodePort of another Node, source Node half (masqueraded to this Node's address)", reporter: "node-a",
			src: hp(f.client, 40020), dst: hp(f.nodeB, 30080), snat: hp(f.nodeA, 40020),
			flowType: inter, side: source, srcEP: client, dstEP: nodeEP("node-b"), key: crossing(40020)},
		{name: "…destination Node half: DNATed to a local Pod, keyed by the pre-DNAT destination", reporter: "node-b",
			src: hp(f.nodeA, 40020), origDst: hp(f.nodeB, 30080), dst: hp(f.dbB, 80), snat: hp(f.gwB, 40020),
			flowType: inter, side: dest, srcEP: nodeEP("node-a"), dstEP: dbB, service: "default/web:http", key: crossing(40020)},
		{name: "Node (host network) → NodePort of another Node, source Node half", reporter: "node-a",
			src: hp(f.nodeA, 40021), dst: hp(f.nodeB, 30080),
			flowType: inter, side: source, srcEP: nodeEP("node-a"), dstEP: nodeEP("node-b"), key: crossing(40021)},
		{name: "…destination Node half", reporter: "node-b",
			src: hp(f.nodeA, 40021), origDst: hp(f.nodeB, 30080), dst: hp(f.dbB, 80), snat: hp(f.gwB, 40021),
			flowType: inter, side: dest, srcEP: nodeEP("node-a"), dstEP: dbB, service: "default/web:http", key: crossing(40021)},
		{name: "Pod → NodePort of another Node whose endpoint is remote to it: the DNAT Node is the destination, not dropped", reporter: "node-b",
			src: hp(f.nodeA, 40022), origDst: hp(f.nodeB, 30080), dst: hp(f.webA, 80), snat: hp(f.nodeB, 40022),
			flowType: inter, side: dest, srcEP: nodeEP("node-a"), dstEP: pod("", "node-a"), service: "default/web:http", key: crossing(40022)},
		{name: "UDP to the NodePort of another Node: the same rule", reporter: "node-b", proto: 17,
			src: hp(f.nodeA, 40023), origDst: hp(f.nodeB, 30080), dst: hp(f.dbB, 80),
			flowType: inter, side: dest, srcEP: nodeEP("node-a"), dstEP: dbB, key: "17|" + hp(f.nodeA, 40023) + "|" + hp(f.nodeB, 30080)},
	}
}

func runCases(t *testing.T, procs map[string]*k8sFlowProcessor, f family, cases []flowCase) {
	for _, c := range cases {
		t.Run(f.name+"/"+c.name, func(t *testing.T) {
			r := c.record()
			reason, _ := procs[c.reporter].enrich(r)
			require.Equal(t, c.drop, reason, "drop reason")
			if c.drop != "" {
				return
			}
			assert.Equal(t, c.flowType, r.FlowType, "flow type %s", r.FlowType)
			assert.Equal(t, c.side, r.Reporter.Side, "side %s", r.Reporter.Side)
			assert.Equal(t, c.reporter, r.Reporter.NodeName)
			assert.Equal(t, c.srcEP, ep{r.Source.Kind, r.Source.PodName, r.Source.NodeName}, "source")
			assert.Equal(t, c.dstEP, ep{r.Destination.Kind, r.Destination.PodName, r.Destination.NodeName}, "destination")
			assert.Equal(t, c.service, r.Service.PortName, "service")
			if c.service != "" {
				o := netip.MustParseAddrPort(c.origDst)
				assert.Equal(t, o.Addr(), r.Service.Address)
				assert.Equal(t, o.Port(), r.Service.Port)
				assert.NotEmpty(t, r.Service.UID)
			} else {
				assert.Equal(t, flowrecord.Service{}, r.Service)
			}
			assert.Equal(t, r.CorrelationKey(), r.Key)
			assert.NotEmpty(t, r.Key)
			if c.key != "" {
				assert.Equal(t, c.key, r.Key, "correlation key")
			}
		})
	}
}

func (c flowCase) record() *flowrecord.Record {
	src, dst := netip.MustParseAddrPort(c.src), netip.MustParseAddrPort(c.dst)
	orig := dst
	if c.origDst != "" {
		orig = netip.MustParseAddrPort(c.origDst)
	}
	r := &flowrecord.Record{
		Start:                      t0.Add(time.Minute),
		End:                        t0.Add(2 * time.Minute),
		Protocol:                   6,
		Source:                     flowrecord.Endpoint{Address: src.Addr(), Port: src.Port()},
		Destination:                flowrecord.Endpoint{Address: dst.Addr(), Port: dst.Port()},
		OriginalDestinationAddress: orig.Addr(),
		OriginalDestinationPort:    orig.Port(),
		Reporter:                   flowrecord.Reporter{NodeName: c.reporter},
	}
	if c.proto != 0 {
		r.Protocol = c.proto
	}
	if c.snat != "" {
		s := netip.MustParseAddrPort(c.snat)
		r.ProxySNATAddress, r.ProxySNATPort = s.Addr(), s.Port()
	}
	return r
}

func TestClassificationTable(t *testing.T) {
	procs := nodeProcessors(t)
	for _, f := range families {
		runCases(t, procs, f, antreaFindFlowTypeCases(f))
		runCases(t, procs, f, issue8260Cases(f))
		runCases(t, procs, f, moreCases(f))
		runCases(t, procs, f, nodePortCases(f))
	}
	// Every Antrea case is accounted for, and every difference says why.
	var differs int
	for _, c := range antreaFindFlowTypeCases(v4) {
		if strings.Contains(c.name, "differs:") {
			differs++
		} else {
			require.True(t, strings.Contains(c.name, "(same"), "case %q must say whether it differs from Antrea", c.name)
		}
	}
	require.Equal(t, 6, differs, "differences from Antrea")
}

// nodeProcessors runs one node collector's processor per test Node.
func nodeProcessors(t *testing.T) map[string]*k8sFlowProcessor {
	clock := newFakeClock(t0.Add(10 * time.Minute))
	procs := map[string]*k8sFlowProcessor{}
	for _, n := range []string{"node-a", "node-b"} {
		procs[n], _ = startProcessor(t, nodeConfig(n), clock, clusterObjects()...)
	}
	return procs
}
