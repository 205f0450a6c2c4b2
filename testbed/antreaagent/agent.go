// Package antreaagent plays an Antrea agent's IPFIX export for tests:
// Antrea's agent template (its IEs in the agent's order) sent with go-ipfix's
// exporting process as the agent uses it (the IPv4 and IPv6 templates on
// connecting, one record per message, the Node's observation domain).
// antrea_flows' tests and the testbed's gateway load run share it; what each
// writes into a record stays with the test.
package antreaagent

import (
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"slices"
	"sync"

	"github.com/vmware/go-ipfix/pkg/entities"
	ipfixexporter "github.com/vmware/go-ipfix/pkg/exporter"
	"github.com/vmware/go-ipfix/pkg/registry"
)

var loadRegistry sync.Once

// IE names an Information Element of the agent's template.
type IE struct {
	Name       string
	Enterprise uint32
}

// IEs is Antrea's agent template: 43 IEs in the agent's order; the IPv6
// template swaps the address IEs for their IPv6 forms.
func IEs(ipv6 bool) []IE {
	fam := func(v4, v6 string) string {
		if ipv6 {
			return v6
		}
		return v4
	}
	var out []IE
	for _, n := range []string{"flowStartSeconds", "flowEndSeconds", "flowEndReason", "sourceTransportPort",
		"destinationTransportPort", "protocolIdentifier", "packetTotalCount", "octetTotalCount", "packetDeltaCount",
		"octetDeltaCount", fam("sourceIPv4Address", "sourceIPv6Address"), fam("destinationIPv4Address", "destinationIPv6Address")} {
		out = append(out, IE{n, registry.IANAEnterpriseID})
	}
	for _, n := range []string{"reversePacketTotalCount", "reverseOctetTotalCount", "reversePacketDeltaCount", "reverseOctetDeltaCount"} {
		out = append(out, IE{n, registry.IANAReversedEnterpriseID})
	}
	for _, n := range []string{"sourcePodName", "sourcePodNamespace", "sourceNodeName", "destinationPodName",
		"destinationPodNamespace", "destinationNodeName", "destinationServicePort", "destinationServicePortName",
		"ingressNetworkPolicyName", "ingressNetworkPolicyNamespace", "ingressNetworkPolicyType",
		"ingressNetworkPolicyRuleName", "ingressNetworkPolicyRuleAction", "egressNetworkPolicyName",
		"egressNetworkPolicyNamespace", "egressNetworkPolicyType", "egressNetworkPolicyRuleName",
		"egressNetworkPolicyRuleAction", "tcpState", "flowType", "egressName", "egressIP", "egressNodeName",
		"proxySnatPort", fam("destinationClusterIPv4", "destinationClusterIPv6"), fam("proxySnatIPv4", "proxySnatIPv6"),
		fam("destinationServiceIPv4", "destinationServiceIPv6")} {
		out = append(out, IE{n, registry.AntreaEnterpriseID})
	}
	return out
}

// Element is go-ipfix's registry entry of an IE (the registry loaded once).
func Element(name string, enterprise uint32) (*entities.InfoElement, error) {
	loadRegistry.Do(registry.LoadRegistry)
	return registry.GetInfoElement(name, enterprise)
}

// ObservationDomain is the agent's observation domain: FNV-1 (not 1a) of its
// Node's name.
func ObservationDomain(node string) uint32 {
	h := fnv.New32()
	_, _ = h.Write([]byte(node))
	return h.Sum32()
}

// Agent is one Antrea agent's IPFIX export.
type Agent struct {
	ep       *ipfixexporter.ExportingProcess
	elements map[bool][]*entities.InfoElement
	tid      map[bool]uint16
}

// New connects an agent of node to address over transport ("tcp", "udp";
// TLS with tlsCfg) and announces its IPv4 and IPv6 templates (256, 257),
// leaving out the IEs named in without (an agent of another version).
func New(address, transport, node string, tlsCfg *ipfixexporter.ExporterTLSClientConfig, without ...string) (*Agent, error) {
	loadRegistry.Do(registry.LoadRegistry)
	ep, err := ipfixexporter.InitExportingProcess(ipfixexporter.ExporterInput{
		CollectorAddress: address, CollectorProtocol: transport, ObservationDomainID: ObservationDomain(node),
		TempRefTimeout: 600, TLSClientConfig: tlsCfg,
	})
	if err != nil {
		return nil, err
	}
	a := &Agent{ep: ep, elements: map[bool][]*entities.InfoElement{}, tid: map[bool]uint16{}}
	for _, v6 := range []bool{false, true} {
		for _, ie := range IEs(v6) {
			if slices.Contains(without, ie.Name) {
				continue
			}
			e, err := Element(ie.Name, ie.Enterprise)
			if err != nil {
				ep.CloseConnToCollector()
				return nil, fmt.Errorf("%s: %w", ie.Name, err)
			}
			a.elements[v6] = append(a.elements[v6], e)
		}
		if a.tid[v6], err = a.Announce(a.elements[v6]); err != nil {
			ep.CloseConnToCollector()
			return nil, err
		}
	}
	return a, nil
}

// Announce sends a template of the elements, beside the agent's own, and
// returns its ID (a test's template of other IEs).
func (a *Agent) Announce(elements []*entities.InfoElement) (uint16, error) {
	ies := make([]entities.InfoElementWithValue, 0, len(elements))
	for _, e := range elements {
		iev, err := entities.DecodeAndCreateInfoElementWithValue(e, nil)
		if err != nil {
			return 0, err
		}
		ies = append(ies, iev)
	}
	tid := a.ep.NewTemplateID()
	return tid, a.sendSet(entities.Template, tid, ies)
}

// SendData sends one record of template tid in its own message.
func (a *Agent) SendData(tid uint16, ies []entities.InfoElementWithValue) error {
	return a.sendSet(entities.Data, tid, ies)
}

// Close closes the agent's connection.
func (a *Agent) Close() { a.ep.CloseConnToCollector() }

// Send sends one record in its own message, with the IPv4 or IPv6 template:
// value gives each IE's value as the agent writes it (uint8, uint16, uint32
// for the seconds, uint64, string, net.IP), nil for the agent's zero (0, "",
// the zero address).
func (a *Agent) Send(ipv6 bool, value func(name string) any) error {
	ies := make([]entities.InfoElementWithValue, 0, len(a.elements[ipv6]))
	for _, e := range a.elements[ipv6] {
		v := value(e.Name)
		if v == nil {
			v = zero(e, ipv6)
		}
		iev, err := WithValue(e, v)
		if err != nil {
			return err
		}
		ies = append(ies, iev)
	}
	return a.SendData(a.tid[ipv6], ies)
}

// WithValue is e carrying v, as the agent writes it: uint8, uint16, uint32
// (dateTimeSeconds, or unsigned32 for an IE of that type), uint64, string
// or net.IP.
func WithValue(e *entities.InfoElement, v any) (entities.InfoElementWithValue, error) {
	switch v := v.(type) {
	case uint8:
		return entities.NewUnsigned8InfoElement(e, v), nil
	case uint16:
		return entities.NewUnsigned16InfoElement(e, v), nil
	case uint32:
		if e.DataType == entities.Unsigned32 {
			return entities.NewUnsigned32InfoElement(e, v), nil
		}
		return entities.NewDateTimeSecondsInfoElement(e, v), nil
	case uint64:
		return entities.NewUnsigned64InfoElement(e, v), nil
	case string:
		return entities.NewStringInfoElement(e, v), nil
	case net.IP:
		return entities.NewIPAddressInfoElement(e, v), nil
	}
	return nil, fmt.Errorf("IE %s: a value of type %T", e.Name, v)
}

func (a *Agent) sendSet(kind entities.ContentType, tid uint16, ies []entities.InfoElementWithValue) error {
	set := entities.NewSet(false)
	if err := set.PrepareSet(kind, tid); err != nil {
		return err
	}
	if err := set.AddRecordV2(ies, tid); err != nil {
		return err
	}
	_, err := a.ep.SendSet(set)
	return err
}

// zero is what the agent writes for an IE it has no value for.
func zero(e *entities.InfoElement, ipv6 bool) any {
	switch e.DataType {
	case entities.Unsigned8:
		return uint8(0)
	case entities.Unsigned16:
		return uint16(0)
	case entities.DateTimeSeconds:
		return uint32(0)
	case entities.Unsigned64:
		return uint64(0)
	case entities.Ipv4Address, entities.Ipv6Address:
		if ipv6 {
			return net.IPv6zero
		}
		return net.IPv4zero.To4()
	}
	return ""
}

// Capture runs send with an agent of node whose exporting process writes
// to memory, and returns what it wrote: its template messages, then a
// message per record sent. Written to a socket later, the bytes are what the
// agent would have sent then, encoded before (a load run's sender).
func Capture(node string, send func(*Agent) error) ([]byte, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		got <- result{b, err}
	}()
	a, err := New(ln.Addr().String(), "tcp", node, nil)
	if err != nil {
		ln.Close()
		<-got
		return nil, err
	}
	err = send(a)
	a.Close()
	r := <-got
	if err != nil {
		return nil, err
	}
	return r.b, r.err
}
