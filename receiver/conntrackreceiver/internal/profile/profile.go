// Package profile decides which conntrack entries become connections and
// under which 5-tuple, per CNI profile (decision D6):
//
//   - generic: the entries of the reported zones (default zone 0) as they are.
//   - antrea: the entries of Antrea's zones (65520 IPv4, 65510 IPv6) that
//     passed policy (ct_mark & 0xF != 0), joined with the host's zone-0 entry
//     of the same connection (Antrea's from-external correlation), plus
//     zone-0 entries the host itself originated (decision D2).
//
// The zone-0 ↔ CNI-zone mapping of a connection is kept for the connection's
// life (decision D5), so a connection whose zone-0 entry expired first keeps
// its client tuple and is never reported a second time under its post-SNAT
// tuple.
package profile

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// Profile names.
const (
	Generic = "generic"
	Antrea  = "antrea"
)

// Antrea's conntrack zones and the ct_mark bits it sets on connections that
// passed policy (ConnSourceCTMarkField).
const (
	AntreaZoneV4 uint16 = 0xfff0 // 65520
	AntreaZoneV6 uint16 = 0xffe6 // 65510
	antreaCTMark uint32 = 0xf
)

// mappingTTL keeps a zone-0 ↔ CNI-zone mapping this long after its CNI-zone
// entry was last seen, so late DESTROY events still find it.
const mappingTTL = time.Minute

// Stats counts what a profile did with the entries offered to it.
type Stats struct {
	Offered int
	Emitted int
	// Entries left out, by reason.
	WrongZone    int // the kernel ignored the zone filter (Linux < 6.8)
	Protocol     int // not in the protocols list
	CTMark       int // antrea: no policy ct_mark, not committed by Antrea
	Uncorrelated int // antrea: zone-0 entry neither matched nor host-originated
}

// Config configures a profile.
type Config struct {
	Name string
	// Zones overrides the reported zones (generic: [0]; antrea: the CNI zones).
	Zones []uint16
	// Protocols lists the IANA protocol numbers to report; nil means all,
	// empty means none (Antrea's filter semantics).
	Protocols []uint8
}

// Profile applies one profile to successive polls and events. Not safe for
// concurrent use.
type Profile struct {
	antrea    bool
	zones     []uint16 // reported zones
	pollZones []uint16 // what to dump, in order (zone 0 first for antrea)
	protocols [256]bool
	local     map[netip.Addr]struct{}
	now       int64

	// antrea: this poll's zone-0 snapshots by correlation key, the host's own
	// zone-0 entries held until the CNI zones are read, and the mappings
	// kept for each correlated CNI-zone entry (by its raw key), with the
	// client keys they produced.
	pending  map[corrKey]pendingEntry
	held     []heldConn
	mappings map[store.Key]*mapping
	clients  map[store.Key]int

	stats Stats
}

// corrKey is Antrea's from-external correlation key: the (post-SNAT) source
// address and port, the post-DNAT destination and the protocol.
type corrKey struct {
	src, dst         netip.Addr
	srcPort, dstPort uint16
	proto            uint8
}

type heldConn struct {
	conn    store.Conn
	claimed bool // a CNI-zone entry carries this connection
}

type pendingEntry struct {
	m    mapping
	held int // index in held of the zone-0 entry if host-originated, else -1
}

// mapping is what the zone-0 entry knew about a connection: the real client,
// the host's SNAT and the pre-DNAT destination.
type mapping struct {
	src         netip.Addr
	srcPort     uint16
	snat        netip.Addr
	snatPort    uint16
	origDst     netip.Addr
	origDstPort uint16
	lastSeen    int64
	client      store.Key
	// cniID is the conntrack ID of the CNI-zone entry: a new entry reusing
	// the tuple is another connection.
	cniID uint32
}

// New returns a profile; the error names what is wrong with the config.
func New(cfg Config) (*Profile, error) {
	p := &Profile{}
	switch cfg.Name {
	case "", Generic:
		p.zones = []uint16{0}
	case Antrea:
		p.antrea = true
		p.zones = []uint16{AntreaZoneV4, AntreaZoneV6}
		p.pending = make(map[corrKey]pendingEntry)
		p.mappings = make(map[store.Key]*mapping)
		p.clients = make(map[store.Key]int)
	default:
		return nil, fmt.Errorf("profile: unknown (got %q); set %s (zone 0, any CNI) or %s", cfg.Name, Generic, Antrea)
	}
	if cfg.Zones != nil {
		p.zones = slices.Clone(cfg.Zones)
	}
	if p.antrea && slices.Contains(p.zones, 0) {
		return nil, fmt.Errorf("zones: the %s profile reads zone 0 for correlation on its own (got %v); list only the CNI zones, or leave zones unset for %d and %d", Antrea, cfg.Zones, AntreaZoneV4, AntreaZoneV6)
	}
	if p.antrea {
		p.pollZones = append([]uint16{0}, p.zones...)
	} else {
		p.pollZones = p.zones
	}
	if cfg.Protocols == nil {
		for i := range p.protocols {
			p.protocols[i] = true
		}
	}
	for _, proto := range cfg.Protocols {
		p.protocols[proto] = true
	}
	return p, nil
}

// PollZones returns the zones to dump, in order.
func (p *Profile) PollZones() []uint16 { return p.pollZones }

// Begin starts a poll at now; local holds the namespace's own addresses.
func (p *Profile) Begin(now time.Time, local map[netip.Addr]struct{}) {
	p.now = now.UnixNano()
	p.local = local
	p.stats = Stats{}
	if p.antrea {
		clear(p.pending)
		p.held = p.held[:0]
	}
}

// Offer passes one entry of the dump of zone (entries arrive zone by zone in
// PollZones order). emit receives each entry that is a reported connection,
// with its key settled; c may be modified.
func (p *Profile) Offer(zone uint16, c *store.Conn, emit func(*store.Conn)) {
	p.stats.Offered++
	if c.Zone != zone {
		p.stats.WrongZone++
		return
	}
	if !p.protocols[c.Proto] {
		p.stats.Protocol++
		return
	}
	if !p.antrea {
		p.stats.Emitted++
		emit(c)
		return
	}
	if zone == 0 {
		p.ingest(c)
		return
	}
	if c.Mark&antreaCTMark == 0 {
		p.stats.CTMark++
		return
	}
	p.correlate(c)
	p.stats.Emitted++
	emit(c)
}

// End finishes a poll: host-originated zone-0 entries no CNI-zone entry
// claimed are reported as they are; other zone-0 entries only served
// correlation. Mappings unseen for mappingTTL are dropped.
func (p *Profile) End(emit func(*store.Conn)) Stats {
	if !p.antrea {
		return p.stats
	}
	for _, pe := range p.pending {
		if pe.held < 0 {
			p.stats.Uncorrelated++
		}
	}
	for i := range p.held {
		if p.held[i].claimed {
			continue
		}
		p.stats.Emitted++
		emit(&p.held[i].conn)
	}
	for raw, m := range p.mappings {
		if p.now-m.lastSeen > int64(mappingTTL) {
			p.dropMapping(raw, m)
		}
	}
	return p.stats
}

func (p *Profile) ingest(c *store.Conn) {
	host := p.isLocal(c.Src)
	nat := c.SNATAddr.IsValid() || c.OrigDst != c.Dst || c.OrigDstPort != c.DstPort
	if !host && !nat {
		p.stats.Uncorrelated++
		return
	}
	k := corrKey{src: c.Src, srcPort: c.SrcPort, dst: c.Dst, dstPort: c.DstPort, proto: c.Proto}
	if c.SNATPort != 0 {
		k.src, k.srcPort = c.SNATAddr, c.SNATPort
	}
	pe := pendingEntry{held: -1, m: mapping{
		src: c.Src, srcPort: c.SrcPort, snat: c.SNATAddr, snatPort: c.SNATPort,
		origDst: c.OrigDst, origDstPort: c.OrigDstPort, client: c.Key,
	}}
	if host {
		pe.held = len(p.held)
		p.held = append(p.held, heldConn{conn: *c})
	}
	p.pending[k] = pe
}

func (p *Profile) correlate(c *store.Conn) {
	raw := c.Key
	k := corrKey{src: c.Src, srcPort: c.SrcPort, dst: c.Dst, dstPort: c.DstPort, proto: c.Proto}
	if c.SNATAddr.IsValid() {
		k.src = c.SNATAddr
	}
	if pe, ok := p.pending[k]; ok {
		delete(p.pending, k)
		if pe.held >= 0 {
			p.held[pe.held].claimed = true
		}
		pe.m.cniID = c.ID
		p.setMapping(raw, pe.m)
	}
	m, ok := p.mappings[raw]
	if !ok {
		return
	}
	if m.cniID != c.ID {
		// The tuple was reused by a connection the zone-0 table does not know.
		p.dropMapping(raw, m)
		return
	}
	m.lastSeen = p.now
	m.apply(c)
}

func (p *Profile) setMapping(raw store.Key, m mapping) {
	if old, ok := p.mappings[raw]; ok {
		p.unclaim(old.client)
		*old = m
	} else {
		p.mappings[raw] = &m
	}
	p.clients[m.client]++
}

// apply rewrites a CNI-zone entry into the connection the zone-0 entry saw.
func (m *mapping) apply(c *store.Conn) {
	c.Src, c.SrcPort = m.src, m.srcPort
	c.SNATAddr, c.SNATPort = m.snat, m.snatPort
	c.OrigDst, c.OrigDstPort = m.origDst, m.origDstPort
}

func (p *Profile) dropMapping(raw store.Key, m *mapping) {
	delete(p.mappings, raw)
	p.unclaim(m.client)
}

func (p *Profile) unclaim(client store.Key) {
	if p.clients[client]--; p.clients[client] <= 0 {
		delete(p.clients, client)
	}
}

func (p *Profile) isLocal(a netip.Addr) bool {
	_, ok := p.local[a]
	return ok
}

// Event decides what a DESTROY event's entry is: ok is false when it is not a
// reported connection (another zone, filtered, a zone-0 entry that only
// served correlation, or whose connection lives on in a CNI zone). c's key is
// settled like a polled entry's.
func (p *Profile) Event(c *store.Conn) bool {
	if !slices.Contains(p.pollZones, c.Zone) || !p.protocols[c.Proto] {
		return false
	}
	if !p.antrea {
		return true
	}
	if c.Zone == 0 {
		// The host's own connection, unless a CNI-zone entry carries it.
		_, carried := p.clients[c.Key]
		return p.isLocal(c.Src) && !carried
	}
	if c.Mark&antreaCTMark == 0 {
		return false
	}
	if m, ok := p.mappings[c.Key]; ok {
		m.apply(c)
	}
	return true
}
