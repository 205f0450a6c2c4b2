package catalogue

import (
	"net/netip"
	"strings"
	"time"

	fr "github.com/flowtel/flowtel/internal/flowrecord"
)

// catalogue is the field catalogue, in the order attributes are written.
var catalogue = finish(buildCatalogue())

// endpointWire is where one side's endpoint goes on the wires: the IDs of its
// IPFIX IEs and the positions of its columns in Antrea's table.
type endpointWire struct {
	ipv4, ipv6, port, namespace, pod, podUID, labels, node, nodeUID uint16
	colIP, colPort, colPod, colNamespace, colNode, colLabels        int
}

func endpointAttrs(side string, get func(*Record) *fr.Endpoint, w endpointWire) []Field {
	p := side + "."
	nat := "the client, before any SNAT"
	if side == "destination" {
		nat = "after DNAT: the Pod or host behind a Service"
	}
	slot := 0 // of the labels map in spares
	if side == "destination" {
		slot = 1
	}
	return []Field{
		addrAttr(p+"address", func(r *Record) *netip.Addr { return &get(r).Address }).
			doc("IP address of the "+side+" ("+nat+").").
			ie(iana(side+"IPv4Address", w.ipv4, IPv4Address), iana(side+"IPv6Address", w.ipv6, IPv6Address)).
			col(antreaCol(side+"IP", CHString, w.colIP)),
		u16(p+"port", func(r *Record) *uint16 { return &get(r).Port }).
			doc("Transport port of the " + side + " (" + nat + "); absent for protocols without ports.").
			ie(iana(side+"TransportPort", w.port, Unsigned16)).col(antreaCol(side+"TransportPort", UInt16, w.colPort)),
		enumAttr("flow."+side+".kind", func(r *Record) *fr.EndpointKind { return &get(r).Kind }).
			doc("What the " + side + " address belongs to: `pod`, `node` (a Node address or a podCIDR gateway address, decision D1) or `external`.").
			col(flowtelCol(side+"EndpointKind", CHString)),
		strAttr(p+"k8s.namespace.name", func(r *Record) *string { return &get(r).Namespace }).
			doc("Namespace of the " + side + " Pod.").
			ie(antrea(side+"PodNamespace", w.namespace, String)).col(antreaCol(side+"PodNamespace", CHString, w.colNamespace)),
		strAttr(p+"k8s.pod.name", func(r *Record) *string { return &get(r).PodName }).
			doc("Name of the " + side + " Pod.").
			ie(antrea(side+"PodName", w.pod, String)).col(antreaCol(side+"PodName", CHString, w.colPod)),
		strAttr(p+"k8s.pod.uid", func(r *Record) *string { return &get(r).PodUID }).
			doc("UID of the " + side + " Pod.").
			ie(antrea(side+"PodUUID", w.podUID, OctetArray)).col(flowtelCol(side+"PodUID", CHString)),
		labelsAttr(p+"k8s.pod.labels", slot, func(r *Record) *map[string]string { return &get(r).PodLabels }).
			doc("Labels of the " + side + " Pod (present and empty for a Pod without labels; absent when not collected). IPFIX and ClickHouse carry them as a JSON object string.").
			ie(antrea(side+"PodLabels", w.labels, String)).col(antreaCol(side+"PodLabels", CHString, w.colLabels)),
		strAttr(p+"k8s.workload.kind", func(r *Record) *string { return &get(r).WorkloadKind }).
			doc("Kind of the workload owning the " + side + " Pod (Deployment, StatefulSet, DaemonSet, CronJob, Job, ReplicaSet, ...).").
			col(flowtelCol(side+"WorkloadKind", CHString)),
		strAttr(p+"k8s.workload.name", func(r *Record) *string { return &get(r).WorkloadName }).
			doc("Name of the workload owning the " + side + " Pod.").col(flowtelCol(side+"WorkloadName", CHString)),
		strAttr(p+"k8s.node.name", func(r *Record) *string { return &get(r).NodeName }).
			doc("Node of the " + side + " Pod, or the Node itself for a node endpoint.").
			ie(antrea(side+"NodeName", w.node, String)).col(antreaCol(side+"NodeName", CHString, w.colNode)),
		strAttr(p+"k8s.node.uid", func(r *Record) *string { return &get(r).NodeUID }).
			doc("UID of that Node.").
			ie(antrea(side+"NodeUUID", w.nodeUID, OctetArray)).col(flowtelCol(side+"NodeUID", CHString)),
	}
}

// countersAttrs builds the four counter fields of one direction. The IPFIX IE
// names are iePrefix + PacketTotalCount/... + ieSuffix (lower camel case), of
// enterprise ent; the IEs named without a suffix are also columns, from
// position col of Antrea's table (0: none).
func countersAttrs(prefix, docWhat, iePrefix, ieSuffix string, ieIDs [4]uint16, ent uint32, col int, aggregated bool, get func(*Record) *fr.Counters) []Field {
	names := [4]string{"packets.total", "bytes.total", "packets.delta", "bytes.delta"}
	bases := [4]string{"PacketTotalCount", "OctetTotalCount", "PacketDeltaCount", "OctetDeltaCount"}
	docs := [4]string{"Packets since the connection started", "Octets (L3 bytes) since the connection started",
		"Packets since the previous export of this connection", "Octets since the previous export of this connection"}
	// One closure a counter, not a composition: the exporters read every counter of every record.
	accessors := [4]func(*Record) *uint64{
		func(r *Record) *uint64 { return &get(r).PacketTotal }, func(r *Record) *uint64 { return &get(r).OctetTotal },
		func(r *Record) *uint64 { return &get(r).PacketDelta }, func(r *Record) *uint64 { return &get(r).OctetDelta },
	}
	out := make([]Field, 0, 4)
	for i := range names {
		ieName := lowerFirst(iePrefix + bases[i])
		a := count(prefix+names[i], accessors[i]).
			doc(docs[i] + ", " + docWhat + ".").
			ie(IE{Name: ieName + ieSuffix, Enterprise: ent, ID: ieIDs[i], Type: Unsigned64})
		if col > 0 {
			a = a.col(antreaCol(ieName, UInt64, col+i))
		}
		if aggregated {
			a = a.agg()
		}
		out = append(out, a)
	}
	return out
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// policyAttrs builds one direction's policy fields; ids are the IEs of Type,
// Namespace, Name, UUID, RuleName, fr.RuleAction and the UID the agents
// send as a string (read only), col the position of the direction's first
// column (Name) in Antrea's table.
func policyAttrs(dir string, get func(*Record) *fr.Policy, ids [7]uint16, col int) []Field {
	p := "flow." + dir + "_policy."
	ie := func(field string, id uint16, t IEType) IE { return antrea(dir+"NetworkPolicy"+field, id, t) }
	column := func(field string, t ColumnType, pos int) Column {
		return antreaCol(dir+"NetworkPolicy"+field, t, col+pos)
	}
	return []Field{
		enumAttr(p+"type", func(r *Record) *fr.PolicyType { return &get(r).Type }).
			doc("Kind of the " + dir + " NetworkPolicy: `k8s_network_policy`, `antrea_network_policy`, `antrea_cluster_network_policy`, `k8s_cluster_network_policy`, `admin_network_policy`, `baseline_admin_network_policy`.").
			ie(ie("Type", ids[0], Unsigned8)).col(column("Type", UInt8, 4)),
		strAttr(p+"namespace", func(r *Record) *string { return &get(r).Namespace }).
			doc("Namespace of the " + dir + " NetworkPolicy (empty for cluster-scoped policies).").
			ie(ie("Namespace", ids[1], String)).col(column("Namespace", CHString, 1)),
		strAttr(p+"name", func(r *Record) *string { return &get(r).Name }).
			doc("Name of the " + dir + " NetworkPolicy.").ie(ie("Name", ids[2], String)).col(column("Name", CHString, 0)),
		strAttr(p+"uid", func(r *Record) *string { return &get(r).UID }).
			doc("UID of the "+dir+" NetworkPolicy.").ie(ie("UUID", ids[3], OctetArray), ie("UID", ids[6], String).inbound()),
		strAttr(p+"rule_name", func(r *Record) *string { return &get(r).RuleName }).
			doc("Name of the " + dir + " rule.").ie(ie("RuleName", ids[4], String)).col(column("RuleName", CHString, 2)),
		enumAttr(p+"rule_action", func(r *Record) *fr.RuleAction { return &get(r).RuleAction }).
			doc("Action of the " + dir + " rule: `allow`, `drop`, `reject`.").
			ie(ie("RuleAction", ids[5], Unsigned8)).col(column("RuleAction", UInt8, 3)),
	}
}

// wireOnly is a field that is not a LogRecord attribute, of kind k, where
// get points: its IEs and columns carry its Ref, the Field has none.
func wireOnly[T any](name, doc string, k Kind, get func(*Record) *T, v Value) Field {
	return Field{name: "(" + name + ")", Doc: doc, wire: refOf(k, get), value: func(bool) Value { return v }}
}

// buildCatalogue lists the fields in the order the attribute form writes
// them and the compact codec's version 1 body holds them: a new field at
// any place is a new compact version (the compactcodec package says how).
func buildCatalogue() []Field {
	var fs []Field
	add := func(f ...Field) { fs = append(fs, f...) }

	add(
		timeAttr("flow.start", func(r *Record) *time.Time { return &r.Start }).
			doc("Connection start (conntrack start timestamp), ns since the Unix epoch. The flow end is the LogRecord Timestamp.").
			ie(iana("flowStartSeconds", 150, DateTimeSeconds)).col(antreaCol("flowStartSeconds", DateTime, 1)),
		uintAttr(AttrProtocol, true, func(r *Record) *uint8 { return &r.Protocol }).
			doc("IANA protocol number.").ie(iana("protocolIdentifier", 4, Unsigned8)).col(antreaCol("protocolIdentifier", UInt8, 10)),
		// Derived: written for readers; a decoder reads the protocol from it
		// only when flow.protocol_identifier is absent.
		Field{Attribute: AttrNetworkTransport, AttrType: "string", Derived: true,
			Doc: "Transport protocol name (`tcp`, `udp`, `sctp`, `icmp`, `ipv6-icmp`, else `unknown`); derived from `flow.protocol_identifier`, which wins when both are present.",
			value: func(bool) Value {
				return Value{Kind: KindString, String: func(r *Record) string { return fr.ProtocolName(r.Protocol) }}
			}},
		Field{Attribute: AttrNetworkType, AttrType: "string", Derived: true,
			Doc:   "`ipv4` or `ipv6`, from the source address.",
			value: func(bool) Value { return Value{Kind: KindString, String: networkType} }},
	)
	add(endpointAttrs("source", func(r *Record) *fr.Endpoint { return &r.Source }, endpointWire{
		ipv4: 8, ipv6: 27, port: 7, namespace: 100, pod: 101, podUID: 159, labels: 143, node: 104, nodeUID: 161,
		colIP: 6, colPort: 8, colPod: 19, colNamespace: 20, colNode: 21, colLabels: 40})...)
	add(endpointAttrs("destination", func(r *Record) *fr.Endpoint { return &r.Destination }, endpointWire{
		ipv4: 12, ipv6: 28, port: 11, namespace: 102, pod: 103, podUID: 160, labels: 144, node: 105, nodeUID: 162,
		colIP: 7, colPort: 9, colPod: 22, colNamespace: 23, colNode: 24, colLabels: 41})...)
	add(
		wireOnly("end", "*(LogRecord `Timestamp`)* End of this record: the connection's last observation.",
			KindTime, func(r *Record) *time.Time { return &r.End }, Value{Kind: KindTime, Time: func(r *Record) time.Time { return r.End }}).
			ie(iana("flowEndSeconds", 151, DateTimeSeconds)).col(antreaCol("flowEndSeconds", DateTime, 2)),
	)
	add(
		addrAttr("flow.original_destination.address", func(r *Record) *netip.Addr { return &r.OriginalDestinationAddress }).
			doc("Pre-DNAT destination address (a Service IP, a NodePort's Node address, ...).").col(flowtelCol("originalDestinationIP", CHString)),
		u16("flow.original_destination.port", func(r *Record) *uint16 { return &r.OriginalDestinationPort }).
			doc("Pre-DNAT destination port.").col(flowtelCol("originalDestinationPort", UInt16)),
	)
	add(countersAttrs("flow.", "source → destination", "", "", [4]uint16{86, 85, 2, 1}, EnterpriseIANA, 11, false,
		func(r *Record) *fr.Counters { return &r.Stats })...)
	add(countersAttrs("flow.reverse.", "destination → source (replies)", "reverse", "", [4]uint16{86, 85, 2, 1}, EnterpriseIANAReverse, 15, false,
		func(r *Record) *fr.Counters { return &r.ReverseStats })...)
	add(
		enumAttr("flow.end_reason", func(r *Record) *fr.EndReason { return &r.EndReason }).
			doc("Why this record was exported: `idle_timeout` (1), `active_timeout` (2), `end_of_flow` (3), `forced_end` (4), `lack_of_resources` (5).").
			ie(iana("flowEndReason", 136, Unsigned8)).col(antreaCol("flowEndReason", UInt8, 5)),
		strAttr("flow.tcp.state", func(r *Record) *string { return &r.TCPState }).
			doc("conntrack TCP state name (`SYN_SENT`, `ESTABLISHED`, `TIME_WAIT`, `CLOSE`, ...); absent for other protocols.").
			ie(antrea("tcpState", 136, String)).col(antreaCol("tcpState", CHString, 38)),
		uintAttr("flow.icmp.type", false, func(r *Record) *uint8 { return &r.ICMP.Type }).
			doc("ICMP or ICMPv6 type of the original direction (8 echo request, 128 ICMPv6 echo request, ...); absent for other protocols."),
		uintAttr("flow.icmp.code", false, func(r *Record) *uint8 { return &r.ICMP.Code }).
			doc("ICMP or ICMPv6 code of the original direction; absent when 0."),
		u16("flow.icmp.id", func(r *Record) *uint16 { return &r.ICMP.ID }).
			doc("ICMP or ICMPv6 identifier (the echo id): two concurrent pings between the same hosts are two connections, told apart by it; absent when 0."),
		enumAttr("flow.type", func(r *Record) *fr.FlowType { return &r.FlowType }).
			doc("`intra_node` (1), `inter_node` (2), `to_external` (3), `from_external` (4); absent = unspecified (0). Follows from the endpoint kinds (decision D1).").
			ie(antrea("flowType", 137, Unsigned8)).col(antreaCol("flowType", UInt8, 39)),
		strAttr("flow.service.port_name", func(r *Record) *string { return &r.Service.PortName }).
			doc("Service the connection was addressed to: `namespace/name`, plus `:port` when the Service port is named.").
			ie(antrea("destinationServicePortName", 109, String)).col(antreaCol("destinationServicePortName", CHString, 27)),
		strAttr("flow.service.uid", func(r *Record) *string { return &r.Service.UID }).
			doc("UID of that Service.").ie(antrea("destinationServiceUUID", 163, OctetArray)).col(flowtelCol("destinationServiceUID", CHString)),
		addrAttr("flow.service.address", func(r *Record) *netip.Addr { return &r.Service.Address }).
			doc("Service address the connection used (ClusterIP, Node address of a NodePort, LoadBalancer ingress IP, externalIP); Antrea's deprecated destinationClusterIP carries it too.").
			ie(antrea("destinationServiceIPv4", 168, IPv4Address), antrea("destinationServiceIPv6", 169, IPv6Address),
				antrea("destinationClusterIPv4", 106, IPv4Address).fallback(), antrea("destinationClusterIPv6", 107, IPv6Address).fallback()).
			col(antreaCol("destinationClusterIP", CHString, 25), flowtelCol("destinationServiceIP", CHString)),
		u16("flow.service.port", func(r *Record) *uint16 { return &r.Service.Port }).
			doc("Service port the connection used.").ie(antrea("destinationServicePort", 108, Unsigned16)).col(antreaCol("destinationServicePort", UInt16, 26)),
		addrAttr("flow.proxy_snat.address", func(r *Record) *netip.Addr { return &r.ProxySNATAddress }).
			doc("Source address after SNAT on the observing hop (kube-proxy masquerade); absent when no SNAT happened.").
			ie(antrea("proxySnatIPv4", 170, IPv4Address), antrea("proxySnatIPv6", 171, IPv6Address)).col(flowtelCol("proxySnatIP", CHString)),
		u16("flow.proxy_snat.port", func(r *Record) *uint16 { return &r.ProxySNATPort }).
			doc("Source port after SNAT on the observing hop.").ie(antrea("proxySnatPort", 172, Unsigned16)).col(flowtelCol("proxySnatPort", UInt16)),
	)
	add(policyAttrs("ingress", func(r *Record) *fr.Policy { return &r.IngressPolicy }, [7]uint16{115, 111, 110, 164, 141, 139, 114}, 28)...)
	add(policyAttrs("egress", func(r *Record) *fr.Policy { return &r.EgressPolicy }, [7]uint16{118, 113, 112, 165, 142, 140, 117}, 33)...)
	add(
		strAttr("flow.egress.name", func(r *Record) *string { return &r.Egress.Name }).
			doc("Antrea Egress used by a to-external flow.").ie(antrea("egressName", 153, String)).col(antreaCol("egressName", CHString, 49)),
		strAttr("flow.egress.uid", func(r *Record) *string { return &r.Egress.UID }).
			doc("UID of that Egress.").ie(antrea("egressUUID", 166, OctetArray)),
		addrAttr("flow.egress.address", func(r *Record) *netip.Addr { return &r.Egress.Address }).
			doc("Egress SNAT IP (IPFIX: as text).").ie(antrea("egressIP", 154, String)).col(antreaCol("egressIP", CHString, 50)),
		strAttr("flow.egress.node.name", func(r *Record) *string { return &r.Egress.NodeName }).
			doc("Node holding the Egress IP.").ie(antrea("egressNodeName", 157, String)).col(antreaCol("egressNodeName", CHString, 51)),
		strAttr("flow.egress.node.uid", func(r *Record) *string { return &r.Egress.NodeUID }).
			doc("UID of that Node.").ie(antrea("egressNodeUUID", 167, OctetArray)),
		u32("flow.conntrack.id", func(r *Record) *uint32 { return &r.Conntrack.ID }).
			doc("conntrack entry ID."),
		u16("flow.conntrack.zone", func(r *Record) *uint16 { return &r.Conntrack.Zone }).
			doc("conntrack zone the entry was read from (absent = zone 0)."),
		u32("flow.conntrack.mark", func(r *Record) *uint32 { return &r.Conntrack.Mark }).
			doc("conntrack mark (ct_mark)."),
		ctLabelsAttr("flow.conntrack.labels").
			doc("conntrack labels (ct_label), 128 bits as 32 hex digits, big-endian; absent when all zero."),
		strAttr("flow.reporter.node.name", func(r *Record) *string { return &r.Reporter.NodeName }).
			doc("Node whose collector observed this half of the connection."),
		enumAttr("flow.reporter.side", func(r *Record) *fr.Side { return &r.Reporter.Side }).
			doc("Which half the reporting Node observed: `source`, `destination` or `both` (both endpoints local); `relay`: the onward leg of a connection this Node DNATed for a client on another Node and forwarded to a third Node, which the gateway pairs and folds away."),
		enumAttr("flow.direction", func(r *Record) *fr.Direction { return &r.Direction }).
			doc("Proxy-mode flow direction: `ingress` (0), `egress` (1), `unknown` (255).").
			ie(iana("flowDirection", 61, Unsigned8).carrying(Value{Kind: KindUint8, Uint8: func(r *Record) uint8 { return r.Direction.IPFIX() }})),
		strAttr(AttrKey, func(r *Record) *string { return &r.Key }).
			doc("Correlation key (decision D3): the same for the source-Node and destination-Node halves of one connection; the LogRecord TraceID is its hash. Routing key of the load_balancing exporter."),
		enumAttr(AttrCorrelationState, func(r *Record) *fr.CorrelationState { return &r.Correlation }).
			doc("`paired` (both halves merged), `unpaired` (no peer within the pairing timeout), `not_required` (nothing to pair).").
			col(flowtelCol("correlationState", CHString)),
		boolAttr("flow.correlation.evicted", func(r *Record) *bool { return &r.Evicted }).
			doc("true when the gateway exported this record before its pairing timeout because its memory cap was reached."),
		u32("flow.original_observation_domain_id", func(r *Record) *uint32 { return &r.Origin.ObservationDomainID }).
			doc("Observation domain ID of the original exporter (proxy mode).").ie(iana("originalObservationDomainId", 405, Unsigned32)),
		addrAttr("flow.original_exporter.address", func(r *Record) *netip.Addr { return &r.Origin.ExporterAddress }).
			doc("Address of the original exporter (proxy mode); each IE carries it when it has the IE's family, else the zero address.").
			ie(iana("originalExporterIPv4Address", 403, IPv4Address).carrying(exporterAddress(false)),
				iana("originalExporterIPv6Address", 404, IPv6Address).carrying(exporterAddress(true))),
	)

	// fr.Aggregation: written only for records that went through aggregate mode.
	add(
		timeAttr("flow.source_node.end", func(r *Record) *time.Time { return &aggregation(r).EndFromSource }).agg().
			doc("End of the latest record from the source Node, ns since the Unix epoch.").
			ie(antrea("flowEndSecondsFromSourceNode", 151, DateTimeSeconds)).
			col(antreaCol("flowEndSecondsFromSourceNode", DateTime, 3).carrying(Value{Kind: KindTime, Time: nodeEnd(fr.SideSource, func(a *fr.Aggregation) time.Time { return a.EndFromSource })}, notAggregatedEnd)),
		timeAttr("flow.destination_node.end", func(r *Record) *time.Time { return &aggregation(r).EndFromDestination }).agg().
			doc("End of the latest record from the destination Node, ns since the Unix epoch.").
			ie(antrea("flowEndSecondsFromDestinationNode", 152, DateTimeSeconds)).
			col(antreaCol("flowEndSecondsFromDestinationNode", DateTime, 4).carrying(Value{Kind: KindTime, Time: nodeEnd(fr.SideDestination, func(a *fr.Aggregation) time.Time { return a.EndFromDestination })}, notAggregatedEnd)),
	)
	add(countersAttrs("flow.source_node.", "as reported by the source Node (deltas: what its reports added since the gateway's previous export, in any arrival order)", "", "FromSourceNode",
		[4]uint16{120, 121, 122, 123}, EnterpriseAntrea, 0, true, func(r *Record) *fr.Counters { return &aggregation(r).StatsFromSource })...)
	add(countersAttrs("flow.source_node.reverse.", "replies, as reported by the source Node", "reverse", "FromSourceNode",
		[4]uint16{124, 125, 126, 127}, EnterpriseAntrea, 0, true, func(r *Record) *fr.Counters { return &aggregation(r).ReverseStatsFromSource })...)
	add(countersAttrs("flow.destination_node.", "as reported by the destination Node", "", "FromDestinationNode",
		[4]uint16{128, 129, 130, 131}, EnterpriseAntrea, 0, true, func(r *Record) *fr.Counters { return &aggregation(r).StatsFromDestination })...)
	add(countersAttrs("flow.destination_node.reverse.", "replies, as reported by the destination Node", "reverse", "FromDestinationNode",
		[4]uint16{132, 133, 134, 135}, EnterpriseAntrea, 0, true, func(r *Record) *fr.Counters { return &aggregation(r).ReverseStatsFromDestination })...)
	thr := func(name, what, wire string, id uint16, col int, get func(*fr.Aggregation) *uint64) Field {
		return uintAttr(name, true, func(r *Record) *uint64 { return get(aggregation(r)) }).agg().
			doc("Throughput in bits/s since the previous report, " + what + ".").
			ie(antrea(wire, id, Unsigned64)).col(antreaCol(wire, UInt64, col))
	}
	add(
		thr("flow.throughput", "source → destination, from the latest record", "throughput", 145, 42,
			func(a *fr.Aggregation) *uint64 { return &a.Throughput }),
		thr("flow.reverse.throughput", "replies, from the latest record", "reverseThroughput", 146, 43,
			func(a *fr.Aggregation) *uint64 { return &a.ReverseThroughput }),
		thr("flow.source_node.throughput", "source → destination, from the source Node", "throughputFromSourceNode", 147, 44,
			func(a *fr.Aggregation) *uint64 { return &a.ThroughputFromSource }),
		thr("flow.source_node.reverse.throughput", "replies, from the source Node", "reverseThroughputFromSourceNode", 149, 46,
			func(a *fr.Aggregation) *uint64 { return &a.ReverseThroughputFromSource }),
		thr("flow.destination_node.throughput", "source → destination, from the destination Node", "throughputFromDestinationNode", 148, 45,
			func(a *fr.Aggregation) *uint64 { return &a.ThroughputFromDestination }),
		thr("flow.destination_node.reverse.throughput", "replies, from the destination Node", "reverseThroughputFromDestinationNode", 150, 47,
			func(a *fr.Aggregation) *uint64 { return &a.ReverseThroughputFromDestination }),
	)
	// The exporters put the value they chose in Record.ClusterUID.
	add(wireOnly("cluster_uid", "*(resource `k8s.cluster.uid`)* Cluster the record was seen in: the exporter's configured value, else the resource attribute `k8s.cluster.uid`.",
		KindString, func(r *Record) *string { return &r.ClusterUID }, Value{Kind: KindString, String: func(r *Record) string { return r.ClusterUID }}).
		ie(antrea("clusterId", 158, String)).col(antreaCol("clusterUUID", CHString, 48)))
	return fs
}

func networkType(r *Record) string {
	if r.IsIPv6() {
		return "ipv6"
	}
	return "ipv4"
}

// exporterAddress is the original exporter's address when it is of the
// family asked for, else invalid (written as the zero address).
func exporterAddress(ipv6 bool) Value {
	return Value{Kind: KindAddr, Addr: func(r *Record) netip.Addr {
		if a := r.Origin.ExporterAddress.Unmap(); a.IsValid() && a.Is6() == ipv6 {
			return a
		}
		return netip.Addr{}
	}}
}

// The per-Node end time columns of a record that was not aggregated (no
// per-Node statistics; Antrea cannot write such records at all): the end time
// of the Node that reported it is the record's own end, the other Node's is
// zero (1970-01-01, as Antrea writes an unset time).

const notAggregatedEnd = "Not aggregated: the record's end for the Node that reported it (`source`, `destination`, both for `both`), else 0."

// nodeEnd is the end time column of the Node on side of a connection.
func nodeEnd(side fr.Side, aggregated func(*fr.Aggregation) time.Time) func(*Record) time.Time {
	return func(r *Record) time.Time {
		if a := r.Aggregation; a != nil {
			return aggregated(a)
		}
		if s := r.Reporter.Side; s == side || s == fr.SideBoth {
			return r.End
		}
		return time.Time{}
	}
}
