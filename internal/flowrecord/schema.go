package flowrecord

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// attribute describes one LogRecord attribute of a flow record: its name, type
// and meaning, where Antrea carries the same value, and how it is encoded from
// and decoded into a Record. The table below is the single source of truth for
// the codec and for docs/flow-schema.md.
type attribute struct {
	Name    string
	Type    string // string, int, bool, map<string,string>
	Doc     string
	IPFIX   string // Antrea IPFIX IE(s): "name (id, enterprise)"
	Column  string // ClickHouse column of the flows table
	Derived bool   // written for readers, ignored when decoding (derived from other attributes)

	aggregation bool // belongs to Record.Aggregation: written only when it is non-nil
	index       int  // position in attributes
	enc         func(r *Record, m pcommon.Map)
	dec         func(r *Record, name string, v pcommon.Value) error
}

func (a attribute) doc(d string) attribute { a.Doc = d; return a }
func (a attribute) ie(s string) attribute  { a.IPFIX = s; return a }
func (a attribute) col(c string) attribute { a.Column = c; return a }
func (a attribute) agg() attribute         { a.aggregation = true; return a }

// aggregation returns r's Aggregation, creating it; used by decoders only.
func aggregation(r *Record) *Aggregation {
	if r.Aggregation == nil {
		r.Aggregation = &Aggregation{}
	}
	return r.Aggregation
}

// Attribute constructors. Each takes an accessor returning a pointer into the
// Record, used for both directions. Zero values are omitted on encode unless
// the attribute is "always" written; an absent attribute decodes to zero.

func strAttr(name string, get func(*Record) *string) attribute {
	return attribute{Name: name, Type: "string",
		enc: func(r *Record, m pcommon.Map) {
			if v := *get(r); v != "" {
				m.PutStr(name, v)
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			s, err := wantStr(name, v)
			*get(r) = s
			return err
		}}
}

func boolAttr(name string, get func(*Record) *bool) attribute {
	return attribute{Name: name, Type: "bool",
		enc: func(r *Record, m pcommon.Map) {
			if *get(r) {
				m.PutBool(name, true)
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			if v.Type() != pcommon.ValueTypeBool {
				return typeError(name, "bool", v)
			}
			*get(r) = v.Bool()
			return nil
		}}
}

// uintAttr encodes an unsigned integer of at most bits bits. always forces the
// attribute to be written when zero (counters a reader expects to find).
func uintAttr[T uint8 | uint16 | uint32 | uint64](name string, always bool, get func(*Record) *T) attribute {
	var zero T
	maxV := uint64(math.MaxInt64)
	switch any(zero).(type) {
	case uint8:
		maxV = math.MaxUint8
	case uint16:
		maxV = math.MaxUint16
	case uint32:
		maxV = math.MaxUint32
	}
	return attribute{Name: name, Type: "int",
		enc: func(r *Record, m pcommon.Map) {
			if v := *get(r); v != 0 || always {
				// uint64 counters above 2^63-1 cannot be held by an int attribute; they saturate.
				m.PutInt(name, int64(min(uint64(v), uint64(math.MaxInt64))))
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			if v.Type() != pcommon.ValueTypeInt {
				return typeError(name, "int", v)
			}
			i := v.Int()
			if i < 0 || uint64(i) > maxV {
				return fmt.Errorf("attribute %q: value %d out of range [0, %d]", name, i, maxV)
			}
			*get(r) = T(i)
			return nil
		}}
}

func u16(name string, get func(*Record) *uint16) attribute   { return uintAttr(name, false, get) }
func u32(name string, get func(*Record) *uint32) attribute   { return uintAttr(name, false, get) }
func count(name string, get func(*Record) *uint64) attribute { return uintAttr(name, true, get) }

func addrAttr(name string, get func(*Record) *netip.Addr) attribute {
	return attribute{Name: name, Type: "string",
		enc: func(r *Record, m pcommon.Map) {
			if a := *get(r); a.IsValid() {
				m.PutStr(name, a.String())
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			s, err := wantStr(name, v)
			if err != nil {
				return err
			}
			a, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("attribute %q: %q is not an IP address", name, s)
			}
			*get(r) = a
			return nil
		}}
}

// timeAttr holds nanoseconds since the Unix epoch.
func timeAttr(name string, get func(*Record) *time.Time) attribute {
	return attribute{Name: name, Type: "int",
		enc: func(r *Record, m pcommon.Map) {
			if t := *get(r); !t.IsZero() {
				m.PutInt(name, t.UnixNano())
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			if v.Type() != pcommon.ValueTypeInt {
				return typeError(name, "int", v)
			}
			if v.Int() <= 0 {
				return fmt.Errorf("attribute %q: %d is not a time after the Unix epoch (ns)", name, v.Int())
			}
			*get(r) = time.Unix(0, v.Int()).UTC()
			return nil
		}}
}

func enumAttr[T ~uint8](name string, names []string, get func(*Record) *T) attribute {
	a := attribute{Name: name, Type: "string",
		enc: func(r *Record, m pcommon.Map) {
			if v := *get(r); v != 0 {
				m.PutStr(name, enumString(names, v))
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			s, err := wantStr(name, v)
			if err != nil {
				return err
			}
			e, ok := parseEnum[T](names, s)
			if !ok {
				return fmt.Errorf("attribute %q: unknown value %q (want one of %v)", name, s, names[1:])
			}
			*get(r) = e
			return nil
		}}
	return a
}

func labelsAttr(name string, get func(*Record) *map[string]string) attribute {
	return attribute{Name: name, Type: "map<string,string>",
		enc: func(r *Record, m pcommon.Map) {
			labels := *get(r)
			if labels == nil {
				return
			}
			lm := m.PutEmptyMap(name)
			lm.EnsureCapacity(len(labels))
			for k, v := range labels {
				lm.PutStr(k, v)
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			if v.Type() != pcommon.ValueTypeMap {
				return typeError(name, "map", v)
			}
			labels := make(map[string]string, v.Map().Len())
			for k, lv := range v.Map().All() {
				if lv.Type() != pcommon.ValueTypeStr {
					return fmt.Errorf("attribute %q: label %q is %s, want string", name, k, lv.Type())
				}
				labels[k] = lv.Str()
			}
			*get(r) = labels
			return nil
		}}
}

func ctLabelsAttr(name string) attribute {
	return attribute{Name: name, Type: "string",
		enc: func(r *Record, m pcommon.Map) {
			if r.Conntrack.Labels != ([16]byte{}) {
				m.PutStr(name, hex.EncodeToString(r.Conntrack.Labels[:]))
			}
		},
		dec: func(r *Record, name string, v pcommon.Value) error {
			s, err := wantStr(name, v)
			if err != nil {
				return err
			}
			if len(s) != 32 {
				return fmt.Errorf("attribute %q: want 32 hex digits, got %d characters", name, len(s))
			}
			if _, err := hex.Decode(r.Conntrack.Labels[:], []byte(s)); err != nil {
				return fmt.Errorf("attribute %q: %v", name, err)
			}
			return nil
		}}
}

func wantStr(name string, v pcommon.Value) (string, error) {
	if v.Type() != pcommon.ValueTypeStr {
		return "", typeError(name, "string", v)
	}
	return v.Str(), nil
}

func typeError(name, want string, v pcommon.Value) error {
	return fmt.Errorf("attribute %q: want %s, got %s", name, want, v.Type())
}

// Attribute names used outside the table (required fields and derived ones).
const (
	AttrSourceAddress      = "source.address"
	AttrDestinationAddress = "destination.address"
	AttrNetworkTransport   = "network.transport"
	AttrNetworkType        = "network.type"
	AttrProtocol           = "flow.protocol_identifier"
	AttrKey                = "flow.key"
	AttrCorrelationState   = "flow.correlation.state"
)

// Resource attributes set by node collectors on the ResourceLogs they emit.
const (
	ResourceNodeName   = "k8s.node.name"
	ResourceClusterUID = "k8s.cluster.uid"
)

func endpointAttrs(side string, get func(*Record) *Endpoint, ie func(string) string, colPrefix string) []attribute {
	p := side + "."
	nat := "the client, before any SNAT"
	if side == "destination" {
		nat = "after DNAT: the Pod or host behind a Service"
	}
	return []attribute{
		addrAttr(p+"address", func(r *Record) *netip.Addr { return &get(r).Address }).
			doc("IP address of the " + side + " (" + nat + ").").
			ie(ie("address")).col(colPrefix + "IP"),
		u16(p+"port", func(r *Record) *uint16 { return &get(r).Port }).
			doc("Transport port of the " + side + " (" + nat + "); absent for protocols without ports.").
			ie(ie("port")).col(colPrefix + "TransportPort"),
		enumAttr("flow."+side+".kind", endpointKindNames, func(r *Record) *EndpointKind { return &get(r).Kind }).
			doc("What the " + side + " address belongs to: `pod`, `node` (a Node address or a podCIDR gateway address, decision D1) or `external`.").
			col(colPrefix + "EndpointKind"),
		strAttr(p+"k8s.namespace.name", func(r *Record) *string { return &get(r).Namespace }).
			doc("Namespace of the " + side + " Pod.").ie(ie("namespace")).col(colPrefix + "PodNamespace"),
		strAttr(p+"k8s.pod.name", func(r *Record) *string { return &get(r).PodName }).
			doc("Name of the " + side + " Pod.").ie(ie("pod")).col(colPrefix + "PodName"),
		strAttr(p+"k8s.pod.uid", func(r *Record) *string { return &get(r).PodUID }).
			doc("UID of the " + side + " Pod.").ie(ie("poduid")).col(colPrefix + "PodUID"),
		labelsAttr(p+"k8s.pod.labels", func(r *Record) *map[string]string { return &get(r).PodLabels }).
			doc("Labels of the " + side + " Pod (present and empty for a Pod without labels; absent when not collected). IPFIX and ClickHouse carry them as a JSON object string.").
			ie(ie("labels")).col(colPrefix + "PodLabels"),
		strAttr(p+"k8s.workload.kind", func(r *Record) *string { return &get(r).WorkloadKind }).
			doc("Kind of the workload owning the " + side + " Pod (Deployment, StatefulSet, DaemonSet, CronJob, Job, ReplicaSet, ...).").
			col(colPrefix + "WorkloadKind"),
		strAttr(p+"k8s.workload.name", func(r *Record) *string { return &get(r).WorkloadName }).
			doc("Name of the workload owning the " + side + " Pod.").col(colPrefix + "WorkloadName"),
		strAttr(p+"k8s.node.name", func(r *Record) *string { return &get(r).NodeName }).
			doc("Node of the " + side + " Pod, or the Node itself for a node endpoint.").ie(ie("node")).col(colPrefix + "NodeName"),
		strAttr(p+"k8s.node.uid", func(r *Record) *string { return &get(r).NodeUID }).
			doc("UID of that Node.").ie(ie("nodeuid")).col(colPrefix + "NodeUID"),
	}
}

func sourceIE(f string) string {
	return map[string]string{
		"address": "sourceIPv4Address (8, 0) / sourceIPv6Address (27, 0)", "port": "sourceTransportPort (7, 0)",
		"namespace": "sourcePodNamespace (100, 56506)", "pod": "sourcePodName (101, 56506)", "poduid": "sourcePodUUID (159, 56506)",
		"labels": "sourcePodLabels (143, 56506)", "node": "sourceNodeName (104, 56506)", "nodeuid": "sourceNodeUUID (161, 56506)",
	}[f]
}

func destinationIE(f string) string {
	return map[string]string{
		"address": "destinationIPv4Address (12, 0) / destinationIPv6Address (28, 0)", "port": "destinationTransportPort (11, 0)",
		"namespace": "destinationPodNamespace (102, 56506)", "pod": "destinationPodName (103, 56506)", "poduid": "destinationPodUUID (160, 56506)",
		"labels": "destinationPodLabels (144, 56506)", "node": "destinationNodeName (105, 56506)", "nodeuid": "destinationNodeUUID (162, 56506)",
	}[f]
}

// countersAttrs builds the four counter attributes of one direction. The IPFIX
// IE names are iePrefix + PacketTotalCount/... + ieSuffix (lower camel case).
func countersAttrs(prefix, docWhat, iePrefix, ieSuffix string, ieIDs [4]int, ent int, withColumn, aggregated bool, get func(*Record) *Counters) []attribute {
	names := [4]string{"packets.total", "bytes.total", "packets.delta", "bytes.delta"}
	bases := [4]string{"PacketTotalCount", "OctetTotalCount", "PacketDeltaCount", "OctetDeltaCount"}
	docs := [4]string{"Packets since the connection started", "Octets (L3 bytes) since the connection started",
		"Packets since the previous export of this connection", "Octets since the previous export of this connection"}
	accessors := [4]func(*Counters) *uint64{
		func(c *Counters) *uint64 { return &c.PacketTotal }, func(c *Counters) *uint64 { return &c.OctetTotal },
		func(c *Counters) *uint64 { return &c.PacketDelta }, func(c *Counters) *uint64 { return &c.OctetDelta },
	}
	out := make([]attribute, 0, 4)
	for i := range names {
		acc := accessors[i]
		ieName := lowerFirst(iePrefix + bases[i])
		a := count(prefix+names[i], func(r *Record) *uint64 { return acc(get(r)) }).
			doc(docs[i] + ", " + docWhat + ".").
			ie(fmt.Sprintf("%s%s (%d, %d)", ieName, ieSuffix, ieIDs[i], ent))
		if withColumn {
			a = a.col(ieName)
		}
		if aggregated {
			a = a.agg()
		}
		out = append(out, a)
	}
	return out
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

func policyAttrs(dir string, get func(*Record) *Policy, ids [6]int) []attribute {
	p := "flow." + dir + "_policy."
	ie := func(field string, id int) string { return fmt.Sprintf("%sNetworkPolicy%s (%d, 56506)", dir, field, id) }
	col := func(field string) string { return dir + "NetworkPolicy" + field }
	return []attribute{
		enumAttr(p+"type", policyTypeNames, func(r *Record) *PolicyType { return &get(r).Type }).
			doc("Kind of the " + dir + " NetworkPolicy: `k8s_network_policy`, `antrea_network_policy`, `antrea_cluster_network_policy`, `k8s_cluster_network_policy`.").
			ie(ie("Type", ids[0])).col(col("Type")),
		strAttr(p+"namespace", func(r *Record) *string { return &get(r).Namespace }).
			doc("Namespace of the " + dir + " NetworkPolicy (empty for cluster-scoped policies).").ie(ie("Namespace", ids[1])).col(col("Namespace")),
		strAttr(p+"name", func(r *Record) *string { return &get(r).Name }).
			doc("Name of the " + dir + " NetworkPolicy.").ie(ie("Name", ids[2])).col(col("Name")),
		strAttr(p+"uid", func(r *Record) *string { return &get(r).UID }).
			doc("UID of the " + dir + " NetworkPolicy.").ie(ie("UUID", ids[3])),
		strAttr(p+"rule_name", func(r *Record) *string { return &get(r).RuleName }).
			doc("Name of the " + dir + " rule.").ie(ie("RuleName", ids[4])).col(col("RuleName")),
		enumAttr(p+"rule_action", ruleActionNames, func(r *Record) *RuleAction { return &get(r).RuleAction }).
			doc("Action of the " + dir + " rule: `allow`, `drop`, `reject`.").ie(ie("RuleAction", ids[5])).col(col("RuleAction")),
	}
}

// attributes is the flow record schema, in the order attributes are written.
var attributes = buildAttributes()

func buildAttributes() []attribute {
	var as []attribute
	add := func(a ...attribute) { as = append(as, a...) }

	add(endpointAttrs("source", func(r *Record) *Endpoint { return &r.Source }, sourceIE, "source")...)
	add(endpointAttrs("destination", func(r *Record) *Endpoint { return &r.Destination }, destinationIE, "destination")...)
	add(
		attribute{Name: AttrNetworkTransport, Type: "string", Derived: true,
			Doc: "Transport protocol name (`tcp`, `udp`, `sctp`, `icmp`, `ipv6-icmp`, else `unknown`); derived from `flow.protocol_identifier`, which wins when both are present.",
			enc: func(r *Record, m pcommon.Map) { m.PutStr(AttrNetworkTransport, ProtocolName(r.Protocol)) },
			dec: func(r *Record, name string, v pcommon.Value) error {
				s, err := wantStr(name, v)
				if err != nil {
					return err
				}
				if p, ok := ProtocolNumber(s); ok && r.Protocol == 0 {
					r.Protocol = p
				}
				return nil
			}},
		attribute{Name: AttrNetworkType, Type: "string", Derived: true,
			Doc: "`ipv4` or `ipv6`, from the source address.",
			enc: func(r *Record, m pcommon.Map) {
				if r.IsIPv6() {
					m.PutStr(AttrNetworkType, "ipv6")
				} else {
					m.PutStr(AttrNetworkType, "ipv4")
				}
			}},
		uintAttr(AttrProtocol, true, func(r *Record) *uint8 { return &r.Protocol }).
			doc("IANA protocol number.").ie("protocolIdentifier (4, 0)").col("protocolIdentifier"),
		timeAttr("flow.start", func(r *Record) *time.Time { return &r.Start }).
			doc("Connection start (conntrack start timestamp), ns since the Unix epoch. The flow end is the LogRecord Timestamp.").
			ie("flowStartSeconds (150, 0)").col("flowStartSeconds"),
		enumAttr("flow.end_reason", endReasonNames, func(r *Record) *EndReason { return &r.EndReason }).
			doc("Why this record was exported: `idle_timeout` (1), `active_timeout` (2), `end_of_flow` (3), `forced_end` (4), `lack_of_resources` (5).").
			ie("flowEndReason (136, 0)").col("flowEndReason"),
		enumAttr("flow.type", flowTypeNames, func(r *Record) *FlowType { return &r.FlowType }).
			doc("`intra_node` (1), `inter_node` (2), `to_external` (3), `from_external` (4); absent = unspecified (0). Follows from the endpoint kinds (decision D1).").
			ie("flowType (137, 56506)").col("flowType"),
		strAttr("flow.tcp.state", func(r *Record) *string { return &r.TCPState }).
			doc("conntrack TCP state name (`SYN_SENT`, `ESTABLISHED`, `TIME_WAIT`, `CLOSE`, ...); absent for other protocols.").
			ie("tcpState (136, 56506)").col("tcpState"),
		uintAttr("flow.icmp.type", false, func(r *Record) *uint8 { return &r.ICMP.Type }).
			doc("ICMP or ICMPv6 type of the original direction (8 echo request, 128 ICMPv6 echo request, ...); absent for other protocols."),
		uintAttr("flow.icmp.code", false, func(r *Record) *uint8 { return &r.ICMP.Code }).
			doc("ICMP or ICMPv6 code of the original direction; absent when 0."),
		u16("flow.icmp.id", func(r *Record) *uint16 { return &r.ICMP.ID }).
			doc("ICMP or ICMPv6 identifier (the echo id): two concurrent pings between the same hosts are two connections, told apart by it; absent when 0."),
	)
	add(countersAttrs("flow.", "source → destination", "", "", [4]int{86, 85, 2, 1}, 0, true, false,
		func(r *Record) *Counters { return &r.Stats })...)
	add(countersAttrs("flow.reverse.", "destination → source (replies)", "reverse", "", [4]int{86, 85, 2, 1}, 29305, true, false,
		func(r *Record) *Counters { return &r.ReverseStats })...)
	add(
		addrAttr("flow.original_destination.address", func(r *Record) *netip.Addr { return &r.OriginalDestinationAddress }).
			doc("Pre-DNAT destination address (a Service IP, a NodePort's Node address, ...).").col("originalDestinationIP"),
		u16("flow.original_destination.port", func(r *Record) *uint16 { return &r.OriginalDestinationPort }).
			doc("Pre-DNAT destination port.").col("originalDestinationPort"),
		strAttr("flow.service.port_name", func(r *Record) *string { return &r.Service.PortName }).
			doc("Service the connection was addressed to: `namespace/name`, plus `:port` when the Service port is named.").
			ie("destinationServicePortName (109, 56506)").col("destinationServicePortName"),
		strAttr("flow.service.uid", func(r *Record) *string { return &r.Service.UID }).
			doc("UID of that Service.").ie("destinationServiceUUID (163, 56506)").col("destinationServiceUID"),
		addrAttr("flow.service.address", func(r *Record) *netip.Addr { return &r.Service.Address }).
			doc("Service address the connection used (ClusterIP, Node address of a NodePort, LoadBalancer ingress IP, externalIP).").
			ie("destinationServiceIPv4 (168, 56506) / destinationServiceIPv6 (169, 56506); destinationClusterIPv4 (106) / v6 (107)").
			col("destinationClusterIP, destinationServiceIP"),
		u16("flow.service.port", func(r *Record) *uint16 { return &r.Service.Port }).
			doc("Service port the connection used.").ie("destinationServicePort (108, 56506)").col("destinationServicePort"),
		addrAttr("flow.proxy_snat.address", func(r *Record) *netip.Addr { return &r.ProxySNATAddress }).
			doc("Source address after SNAT on the observing hop (kube-proxy masquerade); absent when no SNAT happened.").
			ie("proxySnatIPv4 (170, 56506) / proxySnatIPv6 (171, 56506)").col("proxySnatIP"),
		u16("flow.proxy_snat.port", func(r *Record) *uint16 { return &r.ProxySNATPort }).
			doc("Source port after SNAT on the observing hop.").ie("proxySnatPort (172, 56506)").col("proxySnatPort"),
	)
	add(policyAttrs("ingress", func(r *Record) *Policy { return &r.IngressPolicy }, [6]int{115, 111, 110, 164, 141, 139})...)
	add(policyAttrs("egress", func(r *Record) *Policy { return &r.EgressPolicy }, [6]int{118, 113, 112, 165, 142, 140})...)
	add(
		strAttr("flow.egress.name", func(r *Record) *string { return &r.Egress.Name }).
			doc("Antrea Egress used by a to-external flow.").ie("egressName (153, 56506)").col("egressName"),
		strAttr("flow.egress.uid", func(r *Record) *string { return &r.Egress.UID }).
			doc("UID of that Egress.").ie("egressUUID (166, 56506)"),
		addrAttr("flow.egress.address", func(r *Record) *netip.Addr { return &r.Egress.Address }).
			doc("Egress SNAT IP.").ie("egressIP (154, 56506), as a string").col("egressIP"),
		strAttr("flow.egress.node.name", func(r *Record) *string { return &r.Egress.NodeName }).
			doc("Node holding the Egress IP.").ie("egressNodeName (157, 56506)").col("egressNodeName"),
		strAttr("flow.egress.node.uid", func(r *Record) *string { return &r.Egress.NodeUID }).
			doc("UID of that Node.").ie("egressNodeUUID (167, 56506)"),
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
		enumAttr("flow.reporter.side", sideNames, func(r *Record) *Side { return &r.Reporter.Side }).
			doc("Which half the reporting Node observed: `source`, `destination` or `both` (both endpoints local); `relay`: the onward leg of a connection this Node DNATed for a client on another Node and forwarded to a third Node, which the gateway pairs and folds away."),
		enumAttr("flow.direction", directionNames, func(r *Record) *Direction { return &r.Direction }).
			doc("Proxy-mode flow direction: `ingress` (0), `egress` (1), `unknown` (255).").ie("flowDirection (61, 0)"),
		strAttr(AttrKey, func(r *Record) *string { return &r.Key }).
			doc("Correlation key (decision D3): the same for the source-Node and destination-Node halves of one connection; the LogRecord TraceID is its hash. Routing key of the load_balancing exporter."),
		enumAttr(AttrCorrelationState, correlationNames, func(r *Record) *CorrelationState { return &r.Correlation }).
			doc("`paired` (both halves merged), `unpaired` (no peer within the pairing timeout), `not_required` (nothing to pair).").col("correlationState"),
		boolAttr("flow.correlation.evicted", func(r *Record) *bool { return &r.Evicted }).
			doc("true when the gateway exported this record before its pairing timeout because its memory cap was reached."),
		u32("flow.original_observation_domain_id", func(r *Record) *uint32 { return &r.Origin.ObservationDomainID }).
			doc("Observation domain ID of the original exporter (proxy mode).").ie("originalObservationDomainId (405, 0)"),
		addrAttr("flow.original_exporter.address", func(r *Record) *netip.Addr { return &r.Origin.ExporterAddress }).
			doc("Address of the original exporter (proxy mode).").ie("originalExporterIPv4Address (403, 0) / originalExporterIPv6Address (404, 0)"),
	)

	// Aggregation: written only for records that went through aggregate mode.
	add(
		timeAttr("flow.source_node.end", func(r *Record) *time.Time { return &aggregation(r).EndFromSource }).agg().
			doc("End of the latest record from the source Node, ns since the Unix epoch.").
			ie("flowEndSecondsFromSourceNode (151, 56506)").col("flowEndSecondsFromSourceNode"),
		timeAttr("flow.destination_node.end", func(r *Record) *time.Time { return &aggregation(r).EndFromDestination }).agg().
			doc("End of the latest record from the destination Node, ns since the Unix epoch.").
			ie("flowEndSecondsFromDestinationNode (152, 56506)").col("flowEndSecondsFromDestinationNode"),
	)
	add(countersAttrs("flow.source_node.", "as reported by the source Node (deltas: what its reports added since the gateway's previous export, in any arrival order)", "", "FromSourceNode",
		[4]int{120, 121, 122, 123}, 56506, false, true, func(r *Record) *Counters { return &aggregation(r).StatsFromSource })...)
	add(countersAttrs("flow.source_node.reverse.", "replies, as reported by the source Node", "reverse", "FromSourceNode",
		[4]int{124, 125, 126, 127}, 56506, false, true, func(r *Record) *Counters { return &aggregation(r).ReverseStatsFromSource })...)
	add(countersAttrs("flow.destination_node.", "as reported by the destination Node", "", "FromDestinationNode",
		[4]int{128, 129, 130, 131}, 56506, false, true, func(r *Record) *Counters { return &aggregation(r).StatsFromDestination })...)
	add(countersAttrs("flow.destination_node.reverse.", "replies, as reported by the destination Node", "reverse", "FromDestinationNode",
		[4]int{132, 133, 134, 135}, 56506, false, true, func(r *Record) *Counters { return &aggregation(r).ReverseStatsFromDestination })...)
	thr := func(name, what, ie, col string, get func(*Aggregation) *uint64) attribute {
		return uintAttr(name, true, func(r *Record) *uint64 { return get(aggregation(r)) }).agg().
			doc("Throughput in bits/s since the previous report, " + what + ".").ie(ie).col(col)
	}
	add(
		thr("flow.throughput", "source → destination, from the latest record", "throughput (145, 56506)", "throughput",
			func(a *Aggregation) *uint64 { return &a.Throughput }),
		thr("flow.reverse.throughput", "replies, from the latest record", "reverseThroughput (146, 56506)", "reverseThroughput",
			func(a *Aggregation) *uint64 { return &a.ReverseThroughput }),
		thr("flow.source_node.throughput", "source → destination, from the source Node", "throughputFromSourceNode (147, 56506)", "throughputFromSourceNode",
			func(a *Aggregation) *uint64 { return &a.ThroughputFromSource }),
		thr("flow.destination_node.throughput", "source → destination, from the destination Node", "throughputFromDestinationNode (148, 56506)", "throughputFromDestinationNode",
			func(a *Aggregation) *uint64 { return &a.ThroughputFromDestination }),
		thr("flow.source_node.reverse.throughput", "replies, from the source Node", "reverseThroughputFromSourceNode (149, 56506)", "reverseThroughputFromSourceNode",
			func(a *Aggregation) *uint64 { return &a.ReverseThroughputFromSource }),
		thr("flow.destination_node.reverse.throughput", "replies, from the destination Node", "reverseThroughputFromDestinationNode (150, 56506)", "reverseThroughputFromDestinationNode",
			func(a *Aggregation) *uint64 { return &a.ReverseThroughputFromDestination }),
	)
	return as
}
