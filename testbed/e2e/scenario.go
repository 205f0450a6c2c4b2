// Package e2e runs flowtel end to end on a netlab mini-cluster: a real
// kube-apiserver, one node collector per Node namespace, a gateway collector
// behind the node collectors' load_balancing exporter, and a real ClickHouse
// server. The scenario is also `make demo`.
package e2e

import (
	"fmt"
	"net/netip"
	"strings"
)

// Case is one connection the scenario makes, and what flowtel must report for it.
type Case struct {
	Name  string
	From  string // "pod:<name>", "node:<name>" or "external"
	To    string // "pod:<name>", "service:<name>", "nodeport:<service>@<node>" or "external"
	Proto string // tcp or udp
	IPv6  bool
	Sport uint16 // fixed source port: how the rows of this case are found
	// Refused: nothing listens on the destination port (a Pod's closed
	// port); the SYN is answered by RST and the kernel destroys the entry at
	// once, so only a DESTROY event reports it.
	Refused bool
	// Denied: the destination Node drops the connection's packets (a
	// NetworkPolicy enforced by the test's iptables rules, logged to NFLOG);
	// the client's SYNs go unanswered.
	Denied bool
	// Port is the destination port of a Pod destination; 0: the scenario's
	// 8080 (closedPort when Refused).
	Port   uint16
	Expect Expect
}

// closedPort is where nothing listens in the scenario's Pods.
const closedPort = 9

// port is the destination port of a Pod destination.
func (c Case) port() uint16 {
	if c.Port != 0 {
		return c.Port
	}
	if c.Refused {
		return closedPort
	}
	return 8080
}

// Expect is what the ClickHouse row of a case must hold (zero: not checked).
type Expect struct {
	FlowType         uint8
	SourcePod        string
	SourceNode       string
	SourceKind       string
	DestinationPod   string
	DestinationNode  string
	DestinationKind  string
	ServicePortName  string
	CorrelationState string
	SourceIsClient   bool // the source address is the real client (not a SNAT address)
	NoSNAT           bool // no proxy SNAT address or port
	// IngressPolicy / EgressPolicy: "namespace/name/rule/action" of the
	// NetworkPolicy fields (action as its number); "" = not checked.
	IngressPolicy, EgressPolicy string
}

// The scenario's traffic: each connection sends requestBytes and receives
// replyBytes of payload (see flowpeer), so the counters can be checked.
const (
	requestBytes = 3000
	replyBytes   = 2000
)

// Cases is the scenario: every row of the Antrea e2e matrix that needs no
// NetworkPolicy, plus the three Antrea #8260 cases, in both address families where
// the path exists in both.
func Cases() []Case {
	var cs []Case
	add := func(c Case) {
		cs = append(cs, c)
		if c.Proto == "tcp" && !c.IPv6 {
			v6 := c
			v6.Name += " (IPv6)"
			v6.IPv6 = true
			v6.Sport += 100
			cs = append(cs, v6)
		}
	}
	add(Case{Name: "intra-Node Pod to Pod", From: "pod:client-a", To: "pod:web-a", Proto: "tcp", Sport: 41001,
		Expect: Expect{FlowType: 1, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-a", DestinationNode: "node-1",
			SourceKind: "pod", DestinationKind: "pod", CorrelationState: "not_required"}})
	add(Case{Name: "inter-Node Pod to Pod", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: 41002,
		Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
			SourceKind: "pod", DestinationKind: "pod", CorrelationState: "paired"}})
	add(Case{Name: "inter-Node Pod to Pod over UDP", From: "pod:client-a", To: "pod:web-b", Proto: "udp", Sport: 41003,
		Expect: Expect{FlowType: 2, SourcePod: "client-a", DestinationPod: "web-b", CorrelationState: "paired"}})
	add(Case{Name: "remote Service access (ClusterIP)", From: "pod:client-a", To: "service:web-remote", Proto: "tcp", Sport: 41004,
		Expect: Expect{FlowType: 2, SourcePod: "client-a", DestinationPod: "web-b", ServicePortName: "default/web-remote:http", CorrelationState: "paired"}})
	add(Case{Name: "local Service access (ClusterIP)", From: "pod:client-a", To: "service:web-local", Proto: "tcp", Sport: 41005,
		Expect: Expect{FlowType: 1, SourcePod: "client-a", DestinationPod: "web-a", ServicePortName: "default/web-local", CorrelationState: "not_required"}})
	add(Case{Name: "Antrea issue #8260: Node to local Pod", From: "node:node-1", To: "pod:web-a", Proto: "tcp", Sport: 41006,
		Expect: Expect{FlowType: 1, SourceNode: "node-1", SourceKind: "node", DestinationPod: "web-a", DestinationNode: "node-1", CorrelationState: "not_required"}})
	add(Case{Name: "Antrea issue #8260: Node to remote Pod", From: "node:node-1", To: "pod:web-b", Proto: "tcp", Sport: 41007,
		Expect: Expect{FlowType: 2, SourceNode: "node-1", SourceKind: "node", DestinationPod: "web-b", DestinationNode: "node-2", CorrelationState: "paired"}})
	add(Case{Name: "Antrea issue #8260: Node to ClusterIP, SNATed by the proxy", From: "node:node-1", To: "service:web-masq", Proto: "tcp", Sport: 41008,
		Expect: Expect{FlowType: 2, SourceNode: "node-1", SourceKind: "node", DestinationPod: "web-b", ServicePortName: "default/web-masq:http",
			CorrelationState: "paired", SourceIsClient: true}})
	add(Case{Name: "to external", From: "pod:client-a", To: "external", Proto: "tcp", Sport: 41009,
		Expect: Expect{FlowType: 3, SourcePod: "client-a", SourceNode: "node-1", DestinationKind: "external", CorrelationState: "not_required"}})
	add(Case{Name: "from external, NodePort on the Pod's Node", From: "external", To: "nodeport:web-remote@node-2", Proto: "tcp", Sport: 41010,
		Expect: Expect{FlowType: 4, SourceKind: "external", DestinationPod: "web-b", ServicePortName: "default/web-remote:http", SourceIsClient: true}})
	add(Case{Name: "from external, NodePort with externalTrafficPolicy Local (no SNAT)", From: "external", To: "nodeport:web-etp-local@node-2", Proto: "tcp", Sport: 41012,
		Expect: Expect{FlowType: 4, SourceKind: "external", DestinationPod: "web-b", DestinationNode: "node-2", ServicePortName: "default/web-etp-local:http",
			SourceIsClient: true, NoSNAT: true}})
	add(Case{Name: "from external, NodePort on another Node (SNAT)", From: "external", To: "nodeport:web-remote@node-1", Proto: "tcp", Sport: 41011,
		Expect: Expect{FlowType: 4, SourceKind: "external", DestinationPod: "web-b", DestinationNode: "node-2", ServicePortName: "default/web-remote:http",
			CorrelationState: "paired", SourceIsClient: true}})
	// Another Node's NodePort, reached from node-1: node-1 masquerades a Pod to
	// its own address, node-2 DNATs (and masquerades) it; both key on node-1 →
	// node-2:NodePort, so it is one record (decision D3).
	add(Case{Name: "Pod to the NodePort of another Node", From: "pod:client-a", To: "nodeport:web-remote@node-2", Proto: "tcp", Sport: 41013,
		Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
			ServicePortName: "default/web-remote:http", CorrelationState: "paired"}})
	add(Case{Name: "Node to the NodePort of another Node", From: "node:node-1", To: "nodeport:web-remote@node-2", Proto: "tcp", Sport: 41014,
		Expect: Expect{FlowType: 2, SourceKind: "node", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
			ServicePortName: "default/web-remote:http", CorrelationState: "paired"}})
	add(Case{Name: "Pod to the NodePort of another Node, endpoint on a third Node", From: "pod:client-a", To: "nodeport:web-far@node-2", Proto: "tcp", Sport: 41015,
		Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-c", DestinationNode: "node-3",
			ServicePortName: "default/web-far:http", CorrelationState: "paired"}})
	add(Case{Name: "refused: Pod to a closed port on a remote Pod", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: 41020, Refused: true,
		Expect: Expect{FlowType: 2, SourcePod: "client-a", SourceNode: "node-1", DestinationPod: "web-b", DestinationNode: "node-2",
			SourceKind: "pod", DestinationKind: "pod", CorrelationState: "paired"}})
	return cs
}

// Row is what the scenario reads back from ClickHouse for one connection.
type Row struct {
	SourceIP, DestinationIP                 string
	SourcePort, DestinationPort             uint16
	FlowType                                uint8
	SourcePod, SourceNode, SourceKind       string
	DestinationPod, DestinationNode, DstKnd string
	ServicePortName, CorrelationState       string
	OctetTotal, ReverseOctetTotal           uint64
	PacketTotal, ReversePacketTotal         uint64
	ProxySNATIP                             string
	ProxySNATPort                           uint16
	TCPState                                string
	IngressPolicy, EgressPolicy             string // namespace/name/rule/action
}

// Check compares a row with a case's expectations and lists every difference.
func (c Case) Check(r Row, client netip.Addr) []string {
	var bad []string
	e := c.Expect
	want := func(field string, got, want any, checked bool) {
		if checked && fmt.Sprint(got) != fmt.Sprint(want) {
			bad = append(bad, fmt.Sprintf("%s = %v, want %v", field, got, want))
		}
	}
	want("flowType", r.FlowType, e.FlowType, e.FlowType != 0)
	want("sourcePodName", r.SourcePod, e.SourcePod, e.SourcePod != "")
	want("sourceNodeName", r.SourceNode, e.SourceNode, e.SourceNode != "")
	want("sourceEndpointKind", r.SourceKind, e.SourceKind, e.SourceKind != "")
	want("destinationPodName", r.DestinationPod, e.DestinationPod, e.DestinationPod != "")
	want("destinationNodeName", r.DestinationNode, e.DestinationNode, e.DestinationNode != "")
	want("destinationEndpointKind", r.DstKnd, e.DestinationKind, e.DestinationKind != "")
	want("destinationServicePortName", r.ServicePortName, e.ServicePortName, e.ServicePortName != "")
	want("ingressNetworkPolicy", r.IngressPolicy, e.IngressPolicy, e.IngressPolicy != "")
	want("egressNetworkPolicy", r.EgressPolicy, e.EgressPolicy, e.EgressPolicy != "")
	want("correlationState", r.CorrelationState, e.CorrelationState, e.CorrelationState != "")
	want("sourceTransportPort", r.SourcePort, c.Sport, true)
	want("sourceIP", r.SourceIP, client.String(), e.SourceIsClient || strings.HasPrefix(c.From, "pod:") || strings.HasPrefix(c.From, "node:"))
	if e.NoSNAT && (r.ProxySNATIP != "" || r.ProxySNATPort != 0) {
		bad = append(bad, fmt.Sprintf("proxy SNAT %s:%d, want none", r.ProxySNATIP, r.ProxySNATPort))
	}
	if c.Refused {
		// The SYN and the RST, nothing else.
		if r.PacketTotal != 1 || r.ReversePacketTotal != 1 || r.TCPState != "CLOSE" {
			bad = append(bad, fmt.Sprintf("refused: %d+%d packets in %q, want 1+1 (SYN, RST) in CLOSE", r.PacketTotal, r.ReversePacketTotal, r.TCPState))
		}
		return bad
	}
	if c.Denied {
		// SYNs only, nothing came back.
		if r.PacketTotal == 0 || r.ReversePacketTotal != 0 || r.ReverseOctetTotal != 0 {
			bad = append(bad, fmt.Sprintf("denied: %d+%d packets, want the SYNs and nothing back", r.PacketTotal, r.ReversePacketTotal))
		}
		return bad
	}
	// Counters: the payload plus at most 80 bytes of IP and transport headers per packet.
	counters := func(dir string, octets, packets uint64, payload uint64) {
		if octets < payload || octets > payload+80*packets {
			bad = append(bad, fmt.Sprintf("%s octets %d over %d packets: want the %d payload bytes plus headers", dir, octets, packets, payload))
		}
	}
	counters("request", r.OctetTotal, r.PacketTotal, requestBytes)
	counters("reply", r.ReverseOctetTotal, r.ReversePacketTotal, replyBytes)
	return bad
}

// Pings is two concurrent ICMP echo conversations between the same Pods, each
// with its own identifier: two connections, each its own paired record chain
// that says which identifier it is (flow.icmp.id), in both address families.
type Pings struct {
	Name     string
	From, To string // "pod:<name>"
	IPv6     bool
	IDs      [2]uint16
	Count    [2]int // echo requests of each conversation
}

// PingCases are the concurrent-ping cases of the scenario.
func PingCases() []Pings {
	v4 := Pings{Name: "two concurrent pings, inter-Node Pod to Pod", From: "pod:client-a", To: "pod:web-b",
		IDs: [2]uint16{0x5101, 0x5102}, Count: [2]int{5, 3}}
	v6 := v4
	v6.Name += " (IPv6)"
	v6.IPv6 = true
	v6.IDs = [2]uint16{0x5201, 0x5202}
	return []Pings{v4, v6}
}
