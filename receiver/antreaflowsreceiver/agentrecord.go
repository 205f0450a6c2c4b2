package antreaflowsreceiver

import (
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// agentRecord is one flow record as an Antrea agent sends it, whichever the
// transport: the IPFIX decoder and the gRPC server both fill it, and
// halves.go turns it into a flowtel record half. Zero values are "not sent".
type agentRecord struct {
	start, end time.Time
	// exportTime is when the agent sent the record (IPFIX message header,
	// gRPC ipfix.export_time); zero: the receiver's clock.
	exportTime time.Time
	endReason  uint8
	flowType   uint8
	protocol   uint8
	tcpState   string

	src, dst          agentEndpoint
	stats, reverse    agentCounters
	serviceAddr       netip.Addr
	servicePort       uint16
	servicePortName   string
	serviceUID        string
	proxySNATAddr     netip.Addr
	proxySNATPort     uint16
	ingress, egress   agentPolicy
	egressName        string
	egressUID         string
	egressAddr        netip.Addr
	egressNode        string
	egressNodeUID     string
	observationDomain uint32
}

type agentEndpoint struct {
	addr      netip.Addr
	port      uint16
	namespace string
	pod       string
	podUID    string
	node      string
	nodeUID   string
}

type agentCounters struct {
	packetTotal, octetTotal, packetDelta, octetDelta uint64
}

type agentPolicy struct {
	typ        uint8
	namespace  string
	name       string
	uid        string
	rule       string
	ruleAction uint8
}

// The agent record's parts of a record's (fromRecord).

func agentEndpointOf(e *flowrecord.Endpoint) agentEndpoint {
	return agentEndpoint{addr: e.Address, port: e.Port, namespace: e.Namespace, pod: e.PodName, podUID: e.PodUID,
		node: e.NodeName, nodeUID: e.NodeUID}
}

func agentCountersOf(c flowrecord.Counters) agentCounters {
	return agentCounters{packetTotal: c.PacketTotal, octetTotal: c.OctetTotal, packetDelta: c.PacketDelta, octetDelta: c.OctetDelta}
}

func agentPolicyOf(p *flowrecord.Policy) agentPolicy {
	return agentPolicy{typ: uint8(p.Type), namespace: p.Namespace, name: p.Name, uid: p.UID, rule: p.RuleName,
		ruleAction: uint8(p.RuleAction)}
}
