package antreaflowsreceiver

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/go-ipfix/pkg/entities"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
	"github.com/flowtel/flowtel/testbed/antreaagent"
)

// TestAFieldIsOneCatalogueEntry (issue 44): a field in the Record and the
// catalogue, with an IE, is all the receiver needs to read it. Every
// catalogue IE the receiver is to read (readIE, the Inbound and Fallback
// ones too) is sent by an agent as the only IE of its field, in a template
// of its own beside Antrea's agent IEs of the other fields, with a value
// written from the catalogue (its IE's Value, in its IPFIX type), and has to
// come out of the receiver in that field of the record half. Neither this
// test nor the receiver names a field: a new catalogue field with such an
// IE is sent and checked here, and read, without a line of receiver code.
func TestAFieldIsOneCatalogueEntry(t *testing.T) {
	s := startReceiver(t, func(c *Config) { c.IPFIX.MaxTemplatesPerSession = 1000 })
	g := newAgent(t, s.cfg.IPFIX.Endpoint, "tcp", "node-a", nil)
	base, _ := interNodeHalves(43512)
	base.ProxySNATAddress = nodeA // else the receiver drops the SNAT port
	n, inbound, fallback := 0, 0, 0
	for _, f := range catalogue.Fields() {
		for _, ie := range f.IPFIX {
			if !readIE(ie) || f.Name() == "(cluster_uid)" {
				continue // the cluster UID: the attribute form carries it on the resource, where antrea_flows puts its configured one
			}
			want := base
			probeValue(f, ie, &want.Record)
			elements, values := agentIEsBut(t, f, &want)
			e, err := antreaagent.Element(ie.Name, ie.Enterprise)
			require.NoError(t, err, ie.Name)
			elements, values = append(elements, e), append(values, withValue(e, ieValue(ie, &want.Record)))
			g.sendData(t, g.announce(t, elements), values)
			n++
			lastHalfHas(t, s.sink, n, f, &want.Record, "sent alone in "+ie.Name)
			if ie.Inbound {
				inbound++
			}
			if ie.Fallback {
				fallback++
			}
		}
	}
	t.Logf("%d IEs read into their fields", n)
	assert.GreaterOrEqual(t, n, 50)
	assert.Equal(t, 2, inbound, "the agents' string policy UIDs")
	assert.Equal(t, 2, fallback, "destinationClusterIPv4/6")
}

// agentIEsBut are the IPv4 agent template's elements but those of f, and
// their values for r as the agent writes them.
func agentIEsBut(t *testing.T, f catalogue.Field, r *agentRecord) ([]*entities.InfoElement, []entities.InfoElementWithValue) {
	of := map[string]bool{}
	for _, ie := range f.IPFIX {
		of[ie.Name] = true
	}
	var elements []*entities.InfoElement
	var values []entities.InfoElementWithValue
	for _, ie := range antreaagent.IEs(false) {
		if of[ie.Name] {
			continue
		}
		e, err := antreaagent.Element(ie.Name, ie.Enterprise)
		require.NoError(t, err, ie.Name)
		elements, values = append(elements, e), append(values, withValue(e, agentValue(ie.Name, r, false)))
	}
	return elements, values
}

// probeValue gives f in r a value ie carries: the one r has, which the
// half's other fields may depend on (its Node, its addresses), else a value
// the receiver keeps (setIfZero); an IPv6 address for an IPv6 IE.
func probeValue(f catalogue.Field, ie catalogue.IE, r *flowrecord.Record) {
	if ref := f.WireRef(); ie.Type == catalogue.IPv6Address {
		*ref.At(r).Addr() = netip.MustParseAddr("fd00:10:77::3")
	}
	setIfZero(f, r)
}

// ieValue is what an exporter writes in ie for r, from the catalogue alone:
// the IE's Value in the Go type of its IPFIX type (an address as text in a
// string IE).
func ieValue(ie catalogue.IE, r *flowrecord.Record) any {
	v := ie.Value
	switch v.Kind {
	case catalogue.KindUint8, catalogue.KindEnum:
		return v.Uint8(r)
	case catalogue.KindUint16:
		return v.Uint16(r)
	case catalogue.KindUint32:
		return v.Uint32(r)
	case catalogue.KindUint64:
		return v.Uint64(r)
	case catalogue.KindTime:
		return uint32(v.Time(r).Unix())
	case catalogue.KindString:
		return v.String(r)
	case catalogue.KindAddr:
		if ie.Type == catalogue.String {
			return v.Addr(r).String()
		}
		return net.IP(v.Addr(r).AsSlice())
	}
	panic("IE " + ie.Name + ": no value of kind " + v.Kind.String())
}
