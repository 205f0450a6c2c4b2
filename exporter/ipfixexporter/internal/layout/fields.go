package layout

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/vmware/go-ipfix/pkg/entities"
	"github.com/vmware/go-ipfix/pkg/registry"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Context holds the values of a record that do not come from the Record itself.
type Context struct {
	// ClusterID is written to the clusterId IE.
	ClusterID string
}

// setter writes one IE's value for r into ie. It fails with an error naming the
// IE when the value cannot be represented (a string over 65535 bytes, an address
// of the other family).
type setter func(r *flowrecord.Record, c *Context, ie entities.InfoElementWithValue) error

// fieldSpec describes how one IE is filled. newSetter is called once per
// template, so setters can own scratch buffers (addresses, UUIDs) and encode
// without allocating.
type fieldSpec struct {
	enterprise uint32
	newSetter  func(name string, ipv6 bool) setter
}

const (
	iana    = registry.IANAEnterpriseID
	reverse = registry.IANAReversedEnterpriseID
	antrea  = registry.AntreaEnterpriseID
)

// specs maps every IE any layout uses to its enterprise and value. The values
// follow what Antrea writes (reference: antrea-flow-visibility.md §1.10, §2.2.7,
// §2.3, §2.4).
var specs = map[string]fieldSpec{
	"flowStartSeconds":         {iana, seconds(func(r *flowrecord.Record) time.Time { return r.Start })},
	"flowEndSeconds":           {iana, seconds(func(r *flowrecord.Record) time.Time { return r.End })},
	"flowEndReason":            {iana, u8(func(r *flowrecord.Record) uint8 { return uint8(r.EndReason) })},
	"sourceTransportPort":      {iana, u16(func(r *flowrecord.Record) uint16 { return r.Source.Port })},
	"destinationTransportPort": {iana, u16(func(r *flowrecord.Record) uint16 { return r.Destination.Port })},
	"protocolIdentifier":       {iana, u8(func(r *flowrecord.Record) uint8 { return r.Protocol })},
	"packetTotalCount":         {iana, u64(func(r *flowrecord.Record) uint64 { return r.Stats.PacketTotal })},
	"octetTotalCount":          {iana, u64(func(r *flowrecord.Record) uint64 { return r.Stats.OctetTotal })},
	"packetDeltaCount":         {iana, u64(func(r *flowrecord.Record) uint64 { return r.Stats.PacketDelta })},
	"octetDeltaCount":          {iana, u64(func(r *flowrecord.Record) uint64 { return r.Stats.OctetDelta })},
	"sourceIPv4Address":        {iana, addr(func(r *flowrecord.Record) netip.Addr { return r.Source.Address })},
	"destinationIPv4Address":   {iana, addr(func(r *flowrecord.Record) netip.Addr { return r.Destination.Address })},
	"sourceIPv6Address":        {iana, addr(func(r *flowrecord.Record) netip.Addr { return r.Source.Address })},
	"destinationIPv6Address":   {iana, addr(func(r *flowrecord.Record) netip.Addr { return r.Destination.Address })},

	"reversePacketTotalCount": {reverse, u64(func(r *flowrecord.Record) uint64 { return r.ReverseStats.PacketTotal })},
	"reverseOctetTotalCount":  {reverse, u64(func(r *flowrecord.Record) uint64 { return r.ReverseStats.OctetTotal })},
	"reversePacketDeltaCount": {reverse, u64(func(r *flowrecord.Record) uint64 { return r.ReverseStats.PacketDelta })},
	"reverseOctetDeltaCount":  {reverse, u64(func(r *flowrecord.Record) uint64 { return r.ReverseStats.OctetDelta })},

	"sourcePodName":           {antrea, str(func(r *flowrecord.Record) string { return r.Source.PodName })},
	"sourcePodNamespace":      {antrea, str(func(r *flowrecord.Record) string { return r.Source.Namespace })},
	"sourcePodUUID":           {antrea, uuid(func(r *flowrecord.Record) string { return r.Source.PodUID })},
	"sourceNodeName":          {antrea, str(func(r *flowrecord.Record) string { return r.Source.NodeName })},
	"sourceNodeUUID":          {antrea, uuid(func(r *flowrecord.Record) string { return r.Source.NodeUID })},
	"destinationPodName":      {antrea, str(func(r *flowrecord.Record) string { return r.Destination.PodName })},
	"destinationPodNamespace": {antrea, str(func(r *flowrecord.Record) string { return r.Destination.Namespace })},
	"destinationPodUUID":      {antrea, uuid(func(r *flowrecord.Record) string { return r.Destination.PodUID })},
	"destinationNodeName":     {antrea, str(func(r *flowrecord.Record) string { return r.Destination.NodeName })},
	"destinationNodeUUID":     {antrea, uuid(func(r *flowrecord.Record) string { return r.Destination.NodeUID })},

	"destinationServicePort":     {antrea, u16(func(r *flowrecord.Record) uint16 { return r.Service.Port })},
	"destinationServicePortName": {antrea, str(func(r *flowrecord.Record) string { return r.Service.PortName })},
	"destinationServiceUUID":     {antrea, uuid(func(r *flowrecord.Record) string { return r.Service.UID })},

	"ingressNetworkPolicyName":       {antrea, str(func(r *flowrecord.Record) string { return r.IngressPolicy.Name })},
	"ingressNetworkPolicyNamespace":  {antrea, str(func(r *flowrecord.Record) string { return r.IngressPolicy.Namespace })},
	"ingressNetworkPolicyUUID":       {antrea, uuid(func(r *flowrecord.Record) string { return r.IngressPolicy.UID })},
	"ingressNetworkPolicyType":       {antrea, u8(func(r *flowrecord.Record) uint8 { return uint8(r.IngressPolicy.Type) })},
	"ingressNetworkPolicyRuleName":   {antrea, str(func(r *flowrecord.Record) string { return r.IngressPolicy.RuleName })},
	"ingressNetworkPolicyRuleAction": {antrea, u8(func(r *flowrecord.Record) uint8 { return uint8(r.IngressPolicy.RuleAction) })},
	"egressNetworkPolicyName":        {antrea, str(func(r *flowrecord.Record) string { return r.EgressPolicy.Name })},
	"egressNetworkPolicyNamespace":   {antrea, str(func(r *flowrecord.Record) string { return r.EgressPolicy.Namespace })},
	"egressNetworkPolicyUUID":        {antrea, uuid(func(r *flowrecord.Record) string { return r.EgressPolicy.UID })},
	"egressNetworkPolicyType":        {antrea, u8(func(r *flowrecord.Record) uint8 { return uint8(r.EgressPolicy.Type) })},
	"egressNetworkPolicyRuleName":    {antrea, str(func(r *flowrecord.Record) string { return r.EgressPolicy.RuleName })},
	"egressNetworkPolicyRuleAction":  {antrea, u8(func(r *flowrecord.Record) uint8 { return uint8(r.EgressPolicy.RuleAction) })},

	"tcpState":   {antrea, str(func(r *flowrecord.Record) string { return r.TCPState })},
	"flowType":   {antrea, u8(func(r *flowrecord.Record) uint8 { return uint8(r.FlowType) })},
	"egressName": {antrea, str(func(r *flowrecord.Record) string { return r.Egress.Name })},
	"egressUUID": {antrea, uuid(func(r *flowrecord.Record) string { return r.Egress.UID })},
	// Antrea sends the Egress IP as text, "" when there is none.
	"egressIP":       {antrea, addrText(func(r *flowrecord.Record) netip.Addr { return r.Egress.Address })},
	"egressNodeName": {antrea, str(func(r *flowrecord.Record) string { return r.Egress.NodeName })},
	"egressNodeUUID": {antrea, uuid(func(r *flowrecord.Record) string { return r.Egress.NodeUID })},

	"proxySnatPort": {antrea, u16(func(r *flowrecord.Record) uint16 { return r.ProxySNATPort })},
	"proxySnatIPv4": {antrea, addr(func(r *flowrecord.Record) netip.Addr { return r.ProxySNATAddress })},
	"proxySnatIPv6": {antrea, addr(func(r *flowrecord.Record) netip.Addr { return r.ProxySNATAddress })},
	// destinationClusterIP is deprecated in Antrea and carries the Service IP too.
	"destinationClusterIPv4": {antrea, addr(func(r *flowrecord.Record) netip.Addr { return r.Service.Address })},
	"destinationClusterIPv6": {antrea, addr(func(r *flowrecord.Record) netip.Addr { return r.Service.Address })},
	"destinationServiceIPv4": {antrea, addr(func(r *flowrecord.Record) netip.Addr { return r.Service.Address })},
	"destinationServiceIPv6": {antrea, addr(func(r *flowrecord.Record) netip.Addr { return r.Service.Address })},

	// Aggregate mode: per-Node statistics (zero for a record without Aggregation).
	"octetDeltaCountFromSourceNode":             {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromSource.OctetDelta })},
	"octetTotalCountFromSourceNode":             {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromSource.OctetTotal })},
	"packetDeltaCountFromSourceNode":            {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromSource.PacketDelta })},
	"packetTotalCountFromSourceNode":            {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromSource.PacketTotal })},
	"reverseOctetDeltaCountFromSourceNode":      {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseStatsFromSource.OctetDelta })},
	"reverseOctetTotalCountFromSourceNode":      {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseStatsFromSource.OctetTotal })},
	"reversePacketDeltaCountFromSourceNode":     {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseStatsFromSource.PacketDelta })},
	"reversePacketTotalCountFromSourceNode":     {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseStatsFromSource.PacketTotal })},
	"octetDeltaCountFromDestinationNode":        {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromDestination.OctetDelta })},
	"octetTotalCountFromDestinationNode":        {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromDestination.OctetTotal })},
	"packetDeltaCountFromDestinationNode":       {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromDestination.PacketDelta })},
	"packetTotalCountFromDestinationNode":       {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.StatsFromDestination.PacketTotal })},
	"reverseOctetDeltaCountFromDestinationNode": {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseStatsFromDestination.OctetDelta })},
	"reverseOctetTotalCountFromDestinationNode": {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseStatsFromDestination.OctetTotal })},
	"reversePacketDeltaCountFromDestinationNode": {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 {
		return a.ReverseStatsFromDestination.PacketDelta
	})},
	"reversePacketTotalCountFromDestinationNode": {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 {
		return a.ReverseStatsFromDestination.PacketTotal
	})},
	"flowEndSecondsFromSourceNode":         {antrea, aggSeconds(func(a *flowrecord.Aggregation) time.Time { return a.EndFromSource })},
	"flowEndSecondsFromDestinationNode":    {antrea, aggSeconds(func(a *flowrecord.Aggregation) time.Time { return a.EndFromDestination })},
	"throughput":                           {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.Throughput })},
	"throughputFromSourceNode":             {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ThroughputFromSource })},
	"throughputFromDestinationNode":        {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ThroughputFromDestination })},
	"reverseThroughput":                    {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseThroughput })},
	"reverseThroughputFromSourceNode":      {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseThroughputFromSource })},
	"reverseThroughputFromDestinationNode": {antrea, aggU64(func(a *flowrecord.Aggregation) uint64 { return a.ReverseThroughputFromDestination })},

	"sourcePodLabels":      {antrea, labels(func(r *flowrecord.Record) map[string]string { return r.Source.PodLabels })},
	"destinationPodLabels": {antrea, labels(func(r *flowrecord.Record) map[string]string { return r.Destination.PodLabels })},
	"clusterId": {antrea, func(name string, _ bool) setter {
		return func(_ *flowrecord.Record, c *Context, ie entities.InfoElementWithValue) error {
			return setString(name, ie, c.ClusterID)
		}
	}},

	// Proxy mode: who sent the record to us, and the flow's direction.
	"originalObservationDomainId": {iana, u32(func(r *flowrecord.Record) uint32 { return r.Origin.ObservationDomainID })},
	"originalExporterIPv4Address": {iana, familyOnly(false, func(r *flowrecord.Record) netip.Addr { return r.Origin.ExporterAddress })},
	"originalExporterIPv6Address": {iana, familyOnly(true, func(r *flowrecord.Record) netip.Addr { return r.Origin.ExporterAddress })},
	"flowDirection":               {iana, u8(func(r *flowrecord.Record) uint8 { return r.Direction.IPFIX() })},
}

func u8(get func(*flowrecord.Record) uint8) func(string, bool) setter {
	return func(string, bool) setter {
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			ie.SetUnsigned8Value(get(r))
			return nil
		}
	}
}

func u16(get func(*flowrecord.Record) uint16) func(string, bool) setter {
	return func(string, bool) setter {
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			ie.SetUnsigned16Value(get(r))
			return nil
		}
	}
}

func u32(get func(*flowrecord.Record) uint32) func(string, bool) setter {
	return func(string, bool) setter {
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			ie.SetUnsigned32Value(get(r))
			return nil
		}
	}
}

func u64(get func(*flowrecord.Record) uint64) func(string, bool) setter {
	return func(string, bool) setter {
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			ie.SetUnsigned64Value(get(r))
			return nil
		}
	}
}

func aggU64(get func(*flowrecord.Aggregation) uint64) func(string, bool) setter {
	return u64(func(r *flowrecord.Record) uint64 {
		if r.Aggregation == nil {
			return 0
		}
		return get(r.Aggregation)
	})
}

// unixSeconds is a dateTimeSeconds value: 0 for an unknown time.
func unixSeconds(t time.Time) uint32 {
	if t.IsZero() || t.Unix() < 0 {
		return 0
	}
	return uint32(min(t.Unix(), math.MaxUint32))
}

func seconds(get func(*flowrecord.Record) time.Time) func(string, bool) setter {
	return func(string, bool) setter {
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			ie.SetUnsigned32Value(unixSeconds(get(r)))
			return nil
		}
	}
}

func aggSeconds(get func(*flowrecord.Aggregation) time.Time) func(string, bool) setter {
	return seconds(func(r *flowrecord.Record) time.Time {
		if r.Aggregation == nil {
			return time.Time{}
		}
		return get(r.Aggregation)
	})
}

// maxString is the longest value an IPFIX variable-length field can hold.
const maxString = math.MaxUint16

func setString(name string, ie entities.InfoElementWithValue, s string) error {
	if len(s) > maxString {
		return fmt.Errorf("IE %s: value of %d bytes exceeds the IPFIX variable-length limit of %d bytes", name, len(s), maxString)
	}
	ie.SetStringValue(s)
	return nil
}

func str(get func(*flowrecord.Record) string) func(string, bool) setter {
	return func(name string, _ bool) setter {
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			return setString(name, ie, get(r))
		}
	}
}

// labels writes Pod labels as Antrea does: a JSON object (encoding/json's
// rendering of the map: keys sorted, its escaping), "{}" for a Pod without
// labels, "" when labels were not collected (nil map). The setter encodes into
// its own buffer and reuses the last string when the labels repeat, so a
// record costs no allocation in the common case.
func labels(get func(*flowrecord.Record) map[string]string) func(string, bool) setter {
	return func(name string, _ bool) setter {
		var keys []string
		var buf []byte
		var last string
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			m := get(r)
			switch {
			case m == nil:
				return setString(name, ie, "")
			case len(m) == 0:
				return setString(name, ie, "{}")
			}
			keys = keys[:0]
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			buf = append(buf[:0], '{')
			for i, k := range keys {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendJSONString(buf, k)
				buf = append(buf, ':')
				buf = appendJSONString(buf, m[k])
			}
			buf = append(buf, '}')
			if string(buf) != last {
				last = string(buf)
			}
			return setString(name, ie, last)
		}
	}
}

// addr writes an address of the template's family; the zero address (0.0.0.0 or
// ::) stands for "none", as in Antrea. An address of the other family fails the record.
func addr(get func(*flowrecord.Record) netip.Addr) func(string, bool) setter {
	return func(name string, ipv6 bool) setter {
		buf := make(net.IP, addrLen(ipv6))
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			a := get(r).Unmap()
			switch {
			case !a.IsValid():
				clear(buf)
			case a.Is4() && !ipv6:
				b := a.As4()
				copy(buf, b[:])
			case a.Is6() && ipv6:
				b := a.As16()
				copy(buf, b[:])
			default:
				return fmt.Errorf("IE %s: address %s is not of the template's family (IPv6=%t, chosen by the source address)", name, a, ipv6)
			}
			ie.SetIPAddressValue(buf)
			return nil
		}
	}
}

// familyOnly writes the address when it has the IE's family (want6), else the
// zero address: proxy mode's originalExporterIPv4Address/IPv6Address pair.
func familyOnly(want6 bool, get func(*flowrecord.Record) netip.Addr) func(string, bool) setter {
	return func(string, bool) setter {
		buf := make(net.IP, addrLen(want6))
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			a := get(r).Unmap()
			clear(buf)
			if a.IsValid() && a.Is6() == want6 {
				b := a.As16()
				copy(buf, b[16-len(buf):])
			}
			ie.SetIPAddressValue(buf)
			return nil
		}
	}
}

func addrLen(ipv6 bool) int {
	if ipv6 {
		return net.IPv6len
	}
	return net.IPv4len
}

// addrText writes an address as text ("" for none); the last address's text
// is kept, as records of one Egress repeat it.
func addrText(get func(*flowrecord.Record) netip.Addr) func(string, bool) setter {
	return func(name string, _ bool) setter {
		var lastAddr netip.Addr
		var lastText string
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			a := get(r).Unmap()
			if !a.IsValid() {
				return setString(name, ie, "")
			}
			if a != lastAddr {
				lastAddr, lastText = a, a.String()
			}
			return setString(name, ie, lastText)
		}
	}
}

// uuid writes a Kubernetes UID as 16 raw bytes; an empty or unparsable UID is
// the nil UUID, as in Antrea.
func uuid(get func(*flowrecord.Record) string) func(string, bool) setter {
	return func(string, bool) setter {
		buf := make([]byte, 16)
		return func(r *flowrecord.Record, _ *Context, ie entities.InfoElementWithValue) error {
			if !ParseUUID(get(r), buf) {
				clear(buf)
			}
			ie.SetOctetArrayValue(buf)
			return nil
		}
	}
}

// ParseUUID parses the canonical 8-4-4-4-12 hex form into dst (16 bytes).
func ParseUUID(s string, dst []byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	j := 0
	for i := 0; i < len(s); {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[j] = hi<<4 | lo
		j++
		i += 2
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
