package antreaflowsreceiver

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
)

// A setter stores the value of one IE into an agentRecord, or says why the
// value does not fit the IE.
type setter func(r *agentRecord, v []byte) error

// Enterprise numbers of the IEs the agents send.
const (
	entIANA    = 0
	entReverse = 29305 // RFC 5103 reverse IEs
	entAntrea  = 56506
)

type ieID struct {
	enterprise uint32
	id         uint16
}

// setterFor returns how to store the IE, nil for one the receiver does not
// read (skipped, as Antrea's Flow Aggregator skips IEs it does not know).
func setterFor(enterprise uint32, id uint16) setter { return setters[ieID{enterprise, id}] }

// setters are the IEs of Antrea's agent templates (IPv4 and IPv6), by
// enterprise and ID, and where each goes.
var setters = map[ieID]setter{
	{entIANA, 150}: seconds(func(r *agentRecord) *time.Time { return &r.start }), // flowStartSeconds
	{entIANA, 151}: seconds(func(r *agentRecord) *time.Time { return &r.end }),   // flowEndSeconds
	{entIANA, 136}: u8(func(r *agentRecord) *uint8 { return &r.endReason }),      // flowEndReason
	{entIANA, 7}:   u16(func(r *agentRecord) *uint16 { return &r.src.port }),     // sourceTransportPort
	{entIANA, 11}:  u16(func(r *agentRecord) *uint16 { return &r.dst.port }),     // destinationTransportPort
	{entIANA, 4}:   u8(func(r *agentRecord) *uint8 { return &r.protocol }),       // protocolIdentifier
	{entIANA, 86}:  u64(func(r *agentRecord) *uint64 { return &r.stats.packetTotal }),
	{entIANA, 85}:  u64(func(r *agentRecord) *uint64 { return &r.stats.octetTotal }),
	{entIANA, 2}:   u64(func(r *agentRecord) *uint64 { return &r.stats.packetDelta }),
	{entIANA, 1}:   u64(func(r *agentRecord) *uint64 { return &r.stats.octetDelta }),
	{entIANA, 8}:   addr(4, func(r *agentRecord) *netip.Addr { return &r.src.addr }),  // sourceIPv4Address
	{entIANA, 27}:  addr(16, func(r *agentRecord) *netip.Addr { return &r.src.addr }), // sourceIPv6Address
	{entIANA, 12}:  addr(4, func(r *agentRecord) *netip.Addr { return &r.dst.addr }),  // destinationIPv4Address
	{entIANA, 28}:  addr(16, func(r *agentRecord) *netip.Addr { return &r.dst.addr }), // destinationIPv6Address

	{entReverse, 86}: u64(func(r *agentRecord) *uint64 { return &r.reverse.packetTotal }),
	{entReverse, 85}: u64(func(r *agentRecord) *uint64 { return &r.reverse.octetTotal }),
	{entReverse, 2}:  u64(func(r *agentRecord) *uint64 { return &r.reverse.packetDelta }),
	{entReverse, 1}:  u64(func(r *agentRecord) *uint64 { return &r.reverse.octetDelta }),

	{entAntrea, 101}: str(func(r *agentRecord) *string { return &r.src.pod }),         // sourcePodName
	{entAntrea, 100}: str(func(r *agentRecord) *string { return &r.src.namespace }),   // sourcePodNamespace
	{entAntrea, 104}: str(func(r *agentRecord) *string { return &r.src.node }),        // sourceNodeName
	{entAntrea, 103}: str(func(r *agentRecord) *string { return &r.dst.pod }),         // destinationPodName
	{entAntrea, 102}: str(func(r *agentRecord) *string { return &r.dst.namespace }),   // destinationPodNamespace
	{entAntrea, 105}: str(func(r *agentRecord) *string { return &r.dst.node }),        // destinationNodeName
	{entAntrea, 108}: u16(func(r *agentRecord) *uint16 { return &r.servicePort }),     // destinationServicePort
	{entAntrea, 109}: str(func(r *agentRecord) *string { return &r.servicePortName }), // destinationServicePortName
	{entAntrea, 110}: str(func(r *agentRecord) *string { return &r.ingress.name }),    // ingressNetworkPolicyName
	{entAntrea, 111}: str(func(r *agentRecord) *string { return &r.ingress.namespace }),
	{entAntrea, 114}: str(func(r *agentRecord) *string { return &r.ingress.uid }),
	{entAntrea, 115}: u8(func(r *agentRecord) *uint8 { return &r.ingress.typ }),
	{entAntrea, 141}: str(func(r *agentRecord) *string { return &r.ingress.rule }),
	{entAntrea, 139}: u8(func(r *agentRecord) *uint8 { return &r.ingress.ruleAction }),
	{entAntrea, 112}: str(func(r *agentRecord) *string { return &r.egress.name }), // egressNetworkPolicyName
	{entAntrea, 113}: str(func(r *agentRecord) *string { return &r.egress.namespace }),
	{entAntrea, 117}: str(func(r *agentRecord) *string { return &r.egress.uid }),
	{entAntrea, 118}: u8(func(r *agentRecord) *uint8 { return &r.egress.typ }),
	{entAntrea, 142}: str(func(r *agentRecord) *string { return &r.egress.rule }),
	{entAntrea, 140}: u8(func(r *agentRecord) *uint8 { return &r.egress.ruleAction }),
	{entAntrea, 136}: str(func(r *agentRecord) *string { return &r.tcpState }),            // tcpState
	{entAntrea, 137}: u8(func(r *agentRecord) *uint8 { return &r.flowType }),              // flowType
	{entAntrea, 153}: str(func(r *agentRecord) *string { return &r.egressName }),          // egressName
	{entAntrea, 154}: textAddr(func(r *agentRecord) *netip.Addr { return &r.egressAddr }), // egressIP, a string
	{entAntrea, 157}: str(func(r *agentRecord) *string { return &r.egressNode }),          // egressNodeName
	{entAntrea, 172}: u16(func(r *agentRecord) *uint16 { return &r.proxySNATPort }),
	{entAntrea, 170}: addr(4, func(r *agentRecord) *netip.Addr { return &r.proxySNATAddr }),  // proxySnatIPv4
	{entAntrea, 171}: addr(16, func(r *agentRecord) *netip.Addr { return &r.proxySNATAddr }), // proxySnatIPv6
	{entAntrea, 168}: addr(4, func(r *agentRecord) *netip.Addr { return &r.serviceAddr }),    // destinationServiceIPv4
	{entAntrea, 169}: addr(16, func(r *agentRecord) *netip.Addr { return &r.serviceAddr }),   // destinationServiceIPv6
	// destinationClusterIPv4/6 (106, 107): the deprecated name of the
	// Service address, the only one some agents (Antrea v2.6) send; read as
	// the fallback when destinationServiceIPv4/6 is absent or zero, as the
	// gRPC path falls back to destination_cluster_ip.
	{entAntrea, 106}: addr(4, func(r *agentRecord) *netip.Addr { return &r.clusterAddr }),  // destinationClusterIPv4
	{entAntrea, 107}: addr(16, func(r *agentRecord) *netip.Addr { return &r.clusterAddr }), // destinationClusterIPv6
}

// unsigned reads an unsigned integer of any length up to 8 bytes (IPFIX
// allows reduced-size encoding) that must fit in max.
func unsigned(v []byte, max uint64) (uint64, error) {
	if len(v) > 8 {
		return 0, fmt.Errorf("%d bytes, longer than an unsigned64", len(v))
	}
	var n uint64
	for _, c := range v {
		n = n<<8 | uint64(c)
	}
	if n > max {
		return 0, fmt.Errorf("value %d, over %d", n, max)
	}
	return n, nil
}

func u8(get func(*agentRecord) *uint8) setter {
	return func(r *agentRecord, v []byte) error {
		n, err := unsigned(v, 0xff)
		*get(r) = uint8(n)
		return err
	}
}

func u16(get func(*agentRecord) *uint16) setter {
	return func(r *agentRecord, v []byte) error {
		n, err := unsigned(v, 0xffff)
		*get(r) = uint16(n)
		return err
	}
}

func u64(get func(*agentRecord) *uint64) setter {
	return func(r *agentRecord, v []byte) error {
		n, err := unsigned(v, ^uint64(0))
		*get(r) = n
		return err
	}
}

func seconds(get func(*agentRecord) *time.Time) setter {
	return func(r *agentRecord, v []byte) error {
		if len(v) != 4 {
			return fmt.Errorf("%d bytes, not a dateTimeSeconds (4)", len(v))
		}
		if s := binary.BigEndian.Uint32(v); s != 0 {
			*get(r) = time.Unix(int64(s), 0)
		}
		return nil
	}
}

func str(get func(*agentRecord) *string) setter {
	return func(r *agentRecord, v []byte) error {
		*get(r) = string(v)
		return nil
	}
}

// addr reads an address of n bytes; the unspecified address is "not set",
// as the agents write zeros for an absent one.
func addr(n int, get func(*agentRecord) *netip.Addr) setter {
	return func(r *agentRecord, v []byte) error {
		if len(v) != n {
			return fmt.Errorf("%d bytes, not an IPv%d address", len(v), map[int]int{4: 4, 16: 6}[n])
		}
		a, _ := netip.AddrFromSlice(v)
		if !a.IsUnspecified() {
			*get(r) = a
		}
		return nil
	}
}

// textAddr reads an address the agents send as text (egressIP); empty is not set.
func textAddr(get func(*agentRecord) *netip.Addr) setter {
	return func(r *agentRecord, v []byte) error {
		if len(v) == 0 {
			return nil
		}
		a, err := netip.ParseAddr(string(v))
		if err != nil {
			return fmt.Errorf("%q, not an address", v)
		}
		*get(r) = a
		return nil
	}
}
