// Package layout builds the IPFIX templates of Antrea's record layouts (the
// agent's 43 IEs, the Flow Aggregator's aggregate and proxy modes) with the
// go-ipfix registry, and encodes flowrecord.Records into data records and
// Antrea-style JSON objects.
package layout

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/vmware/go-ipfix/pkg/entities"
	"github.com/vmware/go-ipfix/pkg/registry"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Kind names a record layout.
type Kind string

const (
	// Aggregate is the Flow Aggregator's aggregate-mode layout (70 IEs with defaults).
	Aggregate Kind = "aggregate"
	// Proxy is the Flow Aggregator's proxy-mode layout (50 IEs with defaults).
	Proxy Kind = "proxy"
	// Agent is the Antrea agent's layout (43 IEs, fixed).
	Agent Kind = "agent"
)

// Template IDs: Antrea creates the IPv4 template first, then the IPv6 one, from 256.
const (
	TemplateIDv4 uint16 = 256
	TemplateIDv6 uint16 = 257
)

// Options choose a layout and, for the Flow Aggregator layouts, Antrea's
// includeK8sNames / includeK8sUIDs options.
type Options struct {
	Kind            Kind
	IncludeK8sNames bool
	IncludeK8sUIDs  bool
}

func init() {
	// The registry is global in go-ipfix; load it once, before any goroutine reads it.
	registry.LoadRegistry()
}

// catalogueIEs is every IE of the field catalogue, by name: what each carries.
var catalogueIEs = catalogue.IPFIXElements()

// Names returns the IE names of the layout in template order.
func Names(o Options, ipv6 bool) ([]string, error) {
	switch o.Kind {
	case Agent:
		return agentNames(ipv6), nil
	case Aggregate, Proxy:
		return aggregatorNames(o, ipv6), nil
	}
	return nil, fmt.Errorf("unknown record layout %q (want aggregate, proxy or agent)", o.Kind)
}

func family(ipv6 bool, v4, v6 string) string {
	if ipv6 {
		return v6
	}
	return v4
}

func ianaNames(ipv6 bool) []string {
	return []string{
		"flowStartSeconds", "flowEndSeconds", "flowEndReason",
		"sourceTransportPort", "destinationTransportPort", "protocolIdentifier",
		"packetTotalCount", "octetTotalCount", "packetDeltaCount", "octetDeltaCount",
		family(ipv6, "sourceIPv4Address", "sourceIPv6Address"),
		family(ipv6, "destinationIPv4Address", "destinationIPv6Address"),
		"reversePacketTotalCount", "reverseOctetTotalCount", "reversePacketDeltaCount", "reverseOctetDeltaCount",
	}
}

// agentNames is the antrea-agent's template: note that its last three
// IEs are in a different order from the Flow Aggregator's.
func agentNames(ipv6 bool) []string {
	n := ianaNames(ipv6)
	n = append(n,
		"sourcePodName", "sourcePodNamespace", "sourceNodeName",
		"destinationPodName", "destinationPodNamespace", "destinationNodeName",
		"destinationServicePort", "destinationServicePortName",
		"ingressNetworkPolicyName", "ingressNetworkPolicyNamespace", "ingressNetworkPolicyType",
		"ingressNetworkPolicyRuleName", "ingressNetworkPolicyRuleAction",
		"egressNetworkPolicyName", "egressNetworkPolicyNamespace", "egressNetworkPolicyType",
		"egressNetworkPolicyRuleName", "egressNetworkPolicyRuleAction",
		"tcpState", "flowType", "egressName", "egressIP", "egressNodeName", "proxySnatPort",
		family(ipv6, "destinationClusterIPv4", "destinationClusterIPv6"),
		family(ipv6, "proxySnatIPv4", "proxySnatIPv6"),
		family(ipv6, "destinationServiceIPv4", "destinationServiceIPv6"),
	)
	return n
}

// aggregatorNames is the Flow Aggregator's template towards an external
// collector: names and UIDs interleaved per object as the options allow.
func aggregatorNames(o Options, ipv6 bool) []string {
	n := ianaNames(ipv6)
	names, uids := o.IncludeK8sNames, o.IncludeK8sUIDs
	add := func(cond bool, ies ...string) {
		if cond {
			n = append(n, ies...)
		}
	}
	add(names, "sourcePodName", "sourcePodNamespace")
	add(uids, "sourcePodUUID")
	add(names, "sourceNodeName")
	add(uids, "sourceNodeUUID")
	add(names, "destinationPodName", "destinationPodNamespace")
	add(uids, "destinationPodUUID")
	add(names, "destinationNodeName")
	add(uids, "destinationNodeUUID")
	add(true, "destinationServicePort")
	add(names, "destinationServicePortName")
	add(uids, "destinationServiceUUID")
	for _, dir := range []string{"ingress", "egress"} {
		add(names, dir+"NetworkPolicyName", dir+"NetworkPolicyNamespace")
		add(uids, dir+"NetworkPolicyUUID")
		add(true, dir+"NetworkPolicyType")
		// A rule name means nothing without the policy's name or UID.
		add(names || uids, dir+"NetworkPolicyRuleName")
		add(true, dir+"NetworkPolicyRuleAction")
	}
	add(true, "tcpState", "flowType")
	add(names, "egressName")
	add(uids, "egressUUID")
	add(true, "egressIP")
	add(names, "egressNodeName")
	add(uids, "egressNodeUUID")
	add(true, "proxySnatPort",
		family(ipv6, "proxySnatIPv4", "proxySnatIPv6"),
		family(ipv6, "destinationClusterIPv4", "destinationClusterIPv6"),
		family(ipv6, "destinationServiceIPv4", "destinationServiceIPv6"))
	if o.Kind == Aggregate {
		// Per-Node statistics, source then destination for each metric.
		for _, m := range []string{"octetDeltaCount", "octetTotalCount", "packetDeltaCount", "packetTotalCount",
			"reverseOctetDeltaCount", "reverseOctetTotalCount", "reversePacketDeltaCount", "reversePacketTotalCount"} {
			n = append(n, m+"FromSourceNode", m+"FromDestinationNode")
		}
		n = append(n, "flowEndSecondsFromSourceNode", "flowEndSecondsFromDestinationNode")
		for _, t := range []string{"throughput", "reverseThroughput"} {
			n = append(n, t, t+"FromSourceNode", t+"FromDestinationNode")
		}
	}
	n = append(n, "sourcePodLabels", "destinationPodLabels", "clusterId")
	if o.Kind == Proxy {
		n = append(n, "originalObservationDomainId", "originalExporterIPv4Address", "originalExporterIPv6Address", "flowDirection")
	}
	return n
}

// Template is one template of a layout (IPv4 or IPv6): its write plan, which
// encodes Records straight into data records, and the go-ipfix elements the
// JSON records are filled into. A Template is not safe for concurrent use.
type Template struct {
	ID       uint16
	IPv6     bool
	elements []entities.InfoElementWithValue
	// ops write the IEs in template order.
	ops []op
	// minLen is the length of a data record with every string empty.
	minLen int
	// record is the encoded template record (header and field specifiers).
	record []byte
	// jsonOrder lists element indexes by IE name, the key order of Antrea's JSON.
	jsonOrder []int
}

// New builds the layout's IPv4 (ID 256) and IPv6 (ID 257) templates.
func New(o Options) (v4, v6 *Template, err error) {
	if v4, err = newTemplate(o, TemplateIDv4, false); err != nil {
		return nil, nil, err
	}
	if v6, err = newTemplate(o, TemplateIDv6, true); err != nil {
		return nil, nil, err
	}
	return v4, v6, nil
}

func newTemplate(o Options, id uint16, ipv6 bool) (*Template, error) {
	names, err := Names(o, ipv6)
	if err != nil {
		return nil, err
	}
	t := &Template{ID: id, IPv6: ipv6}
	for _, name := range names {
		ie, ok := catalogueIEs[name]
		if !ok {
			return nil, fmt.Errorf("layout %s: IE %s is not in the field catalogue", o.Kind, name)
		}
		reg, err := registry.GetInfoElement(name, ie.Enterprise)
		if err != nil {
			return nil, fmt.Errorf("layout %s: %w", o.Kind, err)
		}
		if reg.ElementId != ie.ID || reg.DataType != entities.IEDataType(ie.Type) {
			return nil, fmt.Errorf("layout %s: IE %s is %d of type %s in the catalogue, %d of type %d in the registry",
				o.Kind, name, ie.ID, ie.Type, reg.ElementId, reg.DataType)
		}
		v, err := entities.DecodeAndCreateInfoElementWithValue(reg, nil)
		if err != nil {
			return nil, fmt.Errorf("layout %s: IE %s: %w", o.Kind, name, err)
		}
		op, err := newOp(ie, ipv6)
		if err != nil {
			return nil, fmt.Errorf("layout %s: %w", o.Kind, err)
		}
		if ie := v.GetInfoElement(); op.fixedLen() != int(ie.Len) && !(ie.Len == entities.VariableLength && op.fixedLen() == 1) {
			return nil, fmt.Errorf("layout %s: IE %s has length %d in the registry, the write plan writes %d", o.Kind, name, ie.Len, op.fixedLen())
		}
		t.elements = append(t.elements, v)
		t.ops = append(t.ops, op)
		t.minLen += op.fixedLen()
	}
	tr := entities.NewTemplateRecordFromElements(id, t.elements)
	if err := tr.PrepareRecord(); err != nil {
		return nil, err
	}
	t.record, err = tr.GetBuffer()
	if err != nil {
		return nil, err
	}
	t.jsonOrder = jsonOrder(t.elements)
	return t, nil
}

// Elements returns the template's IEs in order.
func (t *Template) Elements() []*entities.InfoElement {
	out := make([]*entities.InfoElement, len(t.elements))
	for i, e := range t.elements {
		out[i] = e.GetInfoElement()
	}
	return out
}

// AppendTemplateSet appends a template set holding this template's record.
func (t *Template) AppendTemplateSet(buf []byte) []byte {
	buf = binary.BigEndian.AppendUint16(buf, entities.TemplateSetID)
	buf = binary.BigEndian.AppendUint16(buf, uint16(entities.SetHeaderLen+len(t.record)))
	return append(buf, t.record...)
}

// TemplateSetLen is the length of the template set AppendTemplateSet writes.
func (t *Template) TemplateSetLen() int { return entities.SetHeaderLen + len(t.record) }

// MinRecordLen is the length of a data record with every string empty.
func (t *Template) MinRecordLen() int { return t.minLen }

// Fill sets every go-ipfix element's value from r, for AppendJSON; clusterId
// is r.ClusterUID. On error (naming the IE) the record cannot be encoded; the
// Template stays usable for the next one.
func (t *Template) Fill(r *flowrecord.Record) error {
	for i := range t.ops {
		if err := t.ops[i].set(r, t.elements[i]); err != nil {
			return err
		}
	}
	return nil
}

// AppendRecord appends r encoded as a data record of the template to buf, the
// IEs written in template order straight from r; clusterId is r.ClusterUID.
// On error (naming the IE: a string over 65535 bytes, an address of the other
// family) the record cannot be encoded and buf is returned unchanged.
func (t *Template) AppendRecord(buf []byte, r *flowrecord.Record) ([]byte, error) {
	return appendOps(slices.Grow(buf, t.minLen+256), t.ops, r)
}
