package flowstreamexporter

import (
	"net/netip"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// podRecord is an inter-Node Pod-to-Pod record between two Namespaces, with
// every field a tier can withhold set.
func podRecord(srcNS, srcPod, dstNS, dstPod string) *flowrecord.Record {
	return &flowrecord.Record{
		Start: t0, End: t0.Add(5 * time.Second), Observed: t0.Add(6 * time.Second),
		Protocol: 6,
		Source: flowrecord.Endpoint{Address: netip.MustParseAddr("10.10.0.5"), Port: 43512, Kind: flowrecord.EndpointPod,
			Namespace: srcNS, PodName: srcPod, PodUID: "uid-" + srcPod, PodLabels: map[string]string{"app": srcPod},
			WorkloadKind: "Deployment", WorkloadName: srcPod, NodeName: "node-a", NodeUID: "uid-node-a"},
		Destination: flowrecord.Endpoint{Address: netip.MustParseAddr("10.10.1.7"), Port: 8080, Kind: flowrecord.EndpointPod,
			Namespace: dstNS, PodName: dstPod, PodUID: "uid-" + dstPod, PodLabels: map[string]string{"app": dstPod},
			WorkloadKind: "StatefulSet", WorkloadName: dstPod, NodeName: "node-b", NodeUID: "uid-node-b"},
		OriginalDestinationAddress: netip.MustParseAddr("10.96.0.20"), OriginalDestinationPort: 80,
		Stats:     flowrecord.Counters{PacketTotal: 12, OctetTotal: 3400, PacketDelta: 2, OctetDelta: 400},
		EndReason: flowrecord.EndReasonActiveTimeout, TCPState: "ESTABLISHED",
		FlowType: flowrecord.FlowTypeInterNode,
		Service: flowrecord.Service{PortName: dstNS + "/" + dstPod + "-svc:http", UID: "uid-svc",
			Address: netip.MustParseAddr("10.96.0.20"), Port: 80},
		ProxySNATAddress: netip.MustParseAddr("10.10.0.1"), ProxySNATPort: 61000,
		IngressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: dstNS, Name: "allow-in",
			UID: "uid-np-in", RuleName: "r-in", RuleAction: flowrecord.RuleActionAllow},
		EgressPolicy: flowrecord.Policy{Type: flowrecord.PolicyTypeAntreaNetworkPolicy, Namespace: srcNS, Name: "allow-out",
			UID: "uid-np-out", RuleName: "r-out", RuleAction: flowrecord.RuleActionAllow},
		Egress:   flowrecord.Egress{Name: "egress-1", UID: "uid-egress", Address: netip.MustParseAddr("192.0.2.10"), NodeName: "node-c", NodeUID: "uid-node-c"},
		Reporter: flowrecord.Reporter{NodeName: "node-a", Side: flowrecord.SideBoth},
		Key:      "6|10.10.0.5:43512|10.10.1.7:8080",
		Origin:   flowrecord.Origin{ObservationDomainID: 7, ExporterAddress: netip.MustParseAddr("192.168.0.1")},
	}
}
