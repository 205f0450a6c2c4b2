package flowpb

import (
	"net/netip"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/flowtel/flowtel/api/flowstreampb"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// mappings are the Flow's places of the catalogue fields, by their names.
func mappings() map[string]mapping {
	m := map[string]mapping{
		"flow.start": stamp((*pb.Flow).GetStartTs, func(f *pb.Flow, t *timestamppb.Timestamp) { f.StartTs = t }),
		"(end)":      stamp((*pb.Flow).GetEndTs, func(f *pb.Flow, t *timestamppb.Timestamp) { f.EndTs = t }),
		"flow.protocol_identifier": small("transport: protocol number", catalogue.Loc.Uint8,
			func(f *pb.Flow) int64 { return int64(f.GetTransport().GetProtocolNumber()) },
			func(f *pb.Flow, v uint64) { f.Transport.ProtocolNumber = uint32(v) }),
		"network.type": {putRecord: func(r *flowrecord.Record, f *pb.Flow) { f.Ip.Version = ipVersion(r.Source.Address) }},
		"source.address": addr("ip.source", func(f *pb.Flow) []byte { return f.GetIp().GetSource() },
			func(f *pb.Flow, b []byte) { f.Ip.Source = b }),
		"destination.address": addr("ip.destination", func(f *pb.Flow) []byte { return f.GetIp().GetDestination() },
			func(f *pb.Flow, b []byte) { f.Ip.Destination = b }),
		"source.port": small("transport: source port", catalogue.Loc.Uint16, func(f *pb.Flow) int64 { return int64(f.GetTransport().GetSourcePort()) },
			func(f *pb.Flow, v uint64) { f.Transport.SourcePort = uint32(v) }),
		"destination.port": small("transport: destination port", catalogue.Loc.Uint16, func(f *pb.Flow) int64 { return int64(f.GetTransport().GetDestinationPort()) },
			func(f *pb.Flow, v uint64) { f.Transport.DestinationPort = uint32(v) }),
		"flow.end_reason": small("end_reason", catalogue.Loc.Uint8, func(f *pb.Flow) int64 { return int64(f.GetEndReason()) },
			func(f *pb.Flow, v uint64) { f.EndReason = pb.FlowEndReason(v) }),
		"flow.tcp.state": str(func(f *pb.Flow) string { return f.GetTransport().GetTcp().GetStateName() }, func(f *pb.Flow, s string) {
			if s != "" {
				f.Transport.Protocol = &pb.Transport_Tcp{Tcp: &pb.TCP{StateName: s}}
			}
		}),
		"flow.type": small("k8s.flow_type", catalogue.Loc.Uint8, func(f *pb.Flow) int64 { return int64(f.GetK8S().GetFlowType()) },
			func(f *pb.Flow, v uint64) { k8s(f).FlowType = pb.FlowType(v) }),
		"flow.service.port_name": kstr(func(k *pb.Kubernetes) *string { return &k.DestinationServicePortName }),
		"flow.service.uid":       kstr(func(k *pb.Kubernetes) *string { return &k.DestinationServiceUid }),
		// The Service address goes in both of Antrea's fields; the deprecated
		// destination_cluster_ip is read when destination_service_ip is absent.
		"flow.service.address": addr("k8s.destination_service_ip", func(f *pb.Flow) []byte {
			if b := f.GetK8S().GetDestinationServiceIp(); len(b) > 0 {
				return b
			}
			return f.GetK8S().GetDestinationClusterIp()
		}, func(f *pb.Flow, b []byte) { k8s(f).DestinationServiceIp, k8s(f).DestinationClusterIp = b, b }),
		"flow.service.port": small("k8s.destination_service_port", catalogue.Loc.Uint16, func(f *pb.Flow) int64 { return int64(f.GetK8S().GetDestinationServicePort()) },
			func(f *pb.Flow, v uint64) { k8s(f).DestinationServicePort = uint32(v) }),
		"flow.proxy_snat.address": addr("proxy_snat_ip", (*pb.Flow).GetProxySnatIp, func(f *pb.Flow, b []byte) { f.ProxySnatIp = b }),
		"flow.proxy_snat.port": small("proxy_snat_port", catalogue.Loc.Uint16, func(f *pb.Flow) int64 { return int64(f.GetProxySnatPort()) },
			func(f *pb.Flow, v uint64) { f.ProxySnatPort = uint32(v) }),
		"flow.egress.name": kstr(func(k *pb.Kubernetes) *string { return &k.EgressName }),
		"flow.egress.uid":  kstr(func(k *pb.Kubernetes) *string { return &k.EgressUid }),
		"flow.egress.address": addr("k8s.egress_ip", func(f *pb.Flow) []byte { return f.GetK8S().GetEgressIp() },
			func(f *pb.Flow, b []byte) { k8s(f).EgressIp = b }),
		"flow.egress.node.name": kstr(func(k *pb.Kubernetes) *string { return &k.EgressNodeName }),
		"flow.egress.node.uid":  kstr(func(k *pb.Kubernetes) *string { return &k.EgressNodeUid }),
		// Written for readers; the receiver keys records itself.
		"flow.key": outOnly(str((*pb.Flow).GetId, func(f *pb.Flow, s string) { f.Id = s })),
		// Antrea's flowDirection: 0 ingress, 1 egress, 255 unknown (also for
		// a record without a direction, which reads back as unknown).
		"flow.direction": {
			put: func(l catalogue.Loc, f *pb.Flow) {
				f.FlowDirection = pb.FlowDirection(flowrecord.Direction(*l.Uint8()).IPFIX())
			},
			take: func(f *pb.Flow, l catalogue.Loc) error {
				d := flowrecord.DirectionUnknown
				switch f.GetFlowDirection() {
				case pb.FlowDirection_FLOW_DIRECTION_INGRESS:
					d = flowrecord.DirectionIngress
				case pb.FlowDirection_FLOW_DIRECTION_EGRESS:
					d = flowrecord.DirectionEgress
				}
				*l.Uint8() = uint8(d)
				return nil
			}},
		// The exporting Node's block: the receiver reads the observation
		// domain itself, to tell the reporting Node.
		"flow.original_observation_domain_id": outOnly(u32(func(f *pb.Flow) uint32 { return f.GetIpfix().GetObservationDomainId() },
			func(f *pb.Flow, v uint32) { ipfix(f).ObservationDomainId = v })),
		"flow.original_exporter.address": {
			put: func(l catalogue.Loc, f *pb.Flow) {
				if a := *l.Addr(); a.IsValid() {
					ipfix(f).ExporterIp = a.String()
				}
			},
			take: func(f *pb.Flow, l catalogue.Loc) error {
				*l.Addr() = netip.Addr{}
				if s := f.GetIpfix().GetExporterIp(); s != "" {
					a, err := netip.ParseAddr(s)
					if err != nil {
						return err
					}
					*l.Addr() = a
				}
				return nil
			}},
	}
	endpoint(m, "source", func(k *pb.Kubernetes) *string { return &k.SourcePodNamespace }, func(k *pb.Kubernetes) *string { return &k.SourcePodName },
		func(k *pb.Kubernetes) *string { return &k.SourcePodUid }, func(k *pb.Kubernetes) *string { return &k.SourceNodeName },
		func(k *pb.Kubernetes) *string { return &k.SourceNodeUid }, func(k *pb.Kubernetes) **pb.Labels { return &k.SourcePodLabels })
	endpoint(m, "destination", func(k *pb.Kubernetes) *string { return &k.DestinationPodNamespace }, func(k *pb.Kubernetes) *string { return &k.DestinationPodName },
		func(k *pb.Kubernetes) *string { return &k.DestinationPodUid }, func(k *pb.Kubernetes) *string { return &k.DestinationNodeName },
		func(k *pb.Kubernetes) *string { return &k.DestinationNodeUid }, func(k *pb.Kubernetes) **pb.Labels { return &k.DestinationPodLabels })
	policy(m, "ingress", func(k *pb.Kubernetes) *int32 { return (*int32)(&k.IngressNetworkPolicyType) },
		func(k *pb.Kubernetes) *int32 { return (*int32)(&k.IngressNetworkPolicyRuleAction) },
		func(k *pb.Kubernetes) *string { return &k.IngressNetworkPolicyNamespace }, func(k *pb.Kubernetes) *string { return &k.IngressNetworkPolicyName },
		func(k *pb.Kubernetes) *string { return &k.IngressNetworkPolicyUid }, func(k *pb.Kubernetes) *string { return &k.IngressNetworkPolicyRuleName })
	policy(m, "egress", func(k *pb.Kubernetes) *int32 { return (*int32)(&k.EgressNetworkPolicyType) },
		func(k *pb.Kubernetes) *int32 { return (*int32)(&k.EgressNetworkPolicyRuleAction) },
		func(k *pb.Kubernetes) *string { return &k.EgressNetworkPolicyNamespace }, func(k *pb.Kubernetes) *string { return &k.EgressNetworkPolicyName },
		func(k *pb.Kubernetes) *string { return &k.EgressNetworkPolicyUid }, func(k *pb.Kubernetes) *string { return &k.EgressNetworkPolicyRuleName })
	counters(m, "flow.", (*pb.Flow).GetStats, func(f *pb.Flow) **pb.Stats { return &f.Stats }, true)
	counters(m, "flow.reverse.", (*pb.Flow).GetReverseStats, func(f *pb.Flow) **pb.Stats { return &f.ReverseStats }, true)

	// The aggregation block: written by the gateway, never sent by agents.
	aggStats := func(prefix string, block func(*pb.Aggregation) **pb.Stats) {
		counters(m, prefix, func(f *pb.Flow) *pb.Stats {
			if a := f.GetAggregation(); a != nil {
				return *block(a)
			}
			return nil
		}, func(f *pb.Flow) **pb.Stats { return block(agg(f)) }, false)
	}
	aggStats("flow.source_node.", func(a *pb.Aggregation) **pb.Stats { return &a.StatsFromSource })
	aggStats("flow.source_node.reverse.", func(a *pb.Aggregation) **pb.Stats { return &a.ReverseStatsFromSource })
	aggStats("flow.destination_node.", func(a *pb.Aggregation) **pb.Stats { return &a.StatsFromDestination })
	aggStats("flow.destination_node.reverse.", func(a *pb.Aggregation) **pb.Stats { return &a.ReverseStatsFromDestination })
	m["flow.source_node.end"] = outOnly(stamp(func(f *pb.Flow) *timestamppb.Timestamp { return f.GetAggregation().GetEndTsFromSource() },
		func(f *pb.Flow, t *timestamppb.Timestamp) { agg(f).EndTsFromSource = t }))
	m["flow.destination_node.end"] = outOnly(stamp(func(f *pb.Flow) *timestamppb.Timestamp { return f.GetAggregation().GetEndTsFromDestination() },
		func(f *pb.Flow, t *timestamppb.Timestamp) { agg(f).EndTsFromDestination = t }))
	for name, at := range map[string]func(*pb.Aggregation) *uint64{
		"flow.throughput":                          func(a *pb.Aggregation) *uint64 { return &a.Throughput },
		"flow.reverse.throughput":                  func(a *pb.Aggregation) *uint64 { return &a.ReverseThroughput },
		"flow.source_node.throughput":              func(a *pb.Aggregation) *uint64 { return &a.ThroughputFromSource },
		"flow.source_node.reverse.throughput":      func(a *pb.Aggregation) *uint64 { return &a.ReverseThroughputFromSource },
		"flow.destination_node.throughput":         func(a *pb.Aggregation) *uint64 { return &a.ThroughputFromDestination },
		"flow.destination_node.reverse.throughput": func(a *pb.Aggregation) *uint64 { return &a.ReverseThroughputFromDestination },
	} {
		m[name] = outOnly(u64(func(f *pb.Flow) uint64 {
			if a := f.GetAggregation(); a != nil {
				return *at(a)
			}
			return 0
		}, func(f *pb.Flow, v uint64) { *at(agg(f)) = v }))
	}
	return m
}

// noK8S is read for a Flow without a Kubernetes block; never written.
var noK8S pb.Kubernetes

func readK8S(f *pb.Flow) *pb.Kubernetes {
	if k := f.GetK8S(); k != nil {
		return k
	}
	return &noK8S
}

// kstr is a string of the Kubernetes block.
func kstr(at func(*pb.Kubernetes) *string) mapping {
	return mapping{agent: true,
		put:  func(l catalogue.Loc, f *pb.Flow) { *at(k8s(f)) = *l.String() },
		take: func(f *pb.Flow, l catalogue.Loc) error { *l.String() = *at(readK8S(f)); return nil }}
}

// kenum is a policy type or rule action of the Kubernetes block.
func kenum(at func(*pb.Kubernetes) *int32) mapping {
	return small("k8s: network policy type or rule action", catalogue.Loc.Uint8, func(f *pb.Flow) int64 { return int64(*at(readK8S(f))) },
		func(f *pb.Flow, v uint64) { *at(k8s(f)) = int32(v) })
}

func endpoint(m map[string]mapping, side string, ns, pod, podUID, node, nodeUID func(*pb.Kubernetes) *string, labelsAt func(*pb.Kubernetes) **pb.Labels) {
	p := side + ".k8s."
	m[p+"namespace.name"] = kstr(ns)
	m[p+"pod.name"] = kstr(pod)
	m[p+"pod.uid"] = kstr(podUID)
	m[p+"node.name"] = kstr(node)
	m[p+"node.uid"] = kstr(nodeUID)
	// antrea_flows has not read the agents' Pod labels.
	m[p+"pod.labels"] = labels(func(f *pb.Flow) *pb.Labels { return *labelsAt(readK8S(f)) }, func(f *pb.Flow, l *pb.Labels) { *labelsAt(k8s(f)) = l })
}

func policy(m map[string]mapping, dir string, typ, action func(*pb.Kubernetes) *int32, ns, name, uid, rule func(*pb.Kubernetes) *string) {
	p := "flow." + dir + "_policy."
	m[p+"type"] = kenum(typ)
	m[p+"namespace"] = kstr(ns)
	m[p+"name"] = kstr(name)
	m[p+"uid"] = kstr(uid)
	m[p+"rule_name"] = kstr(rule)
	m[p+"rule_action"] = kenum(action)
}
