package profile

import (
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// conn builds an entry: original src→dst, reply from rsrc to rdst ("" = no NAT).
func conn(zone uint16, proto uint8, src, dst, rsrc, rdst string, mark uint32, id uint32) store.Conn {
	s, d := ap(src), ap(dst)
	c := store.Conn{Key: store.Key{Src: s.Addr(), SrcPort: s.Port(), Dst: d.Addr(), DstPort: d.Port(), Proto: proto},
		OrigDst: d.Addr(), OrigDstPort: d.Port(), Zone: zone, Mark: mark, ID: id}
	if rsrc != "" {
		rs, rd := ap(rsrc), ap(rdst)
		c.Dst, c.DstPort = rs.Addr(), rs.Port()
		if rd != s {
			c.SNATAddr, c.SNATPort = rd.Addr(), rd.Port()
		}
	}
	return c
}

// poll runs one poll through p and returns the emitted connections.
func poll(p *Profile, at time.Duration, local []string, conns ...store.Conn) ([]store.Conn, Stats) {
	l := map[netip.Addr]struct{}{}
	for _, a := range local {
		l[netip.MustParseAddr(a)] = struct{}{}
	}
	p.Begin(t0.Add(at), l)
	var out []store.Conn
	emit := func(c *store.Conn) { out = append(out, *c) }
	for _, z := range p.PollZones() {
		for _, c := range conns {
			c := c
			p.Offer(z, &c, emit)
		}
	}
	return out, p.End(emit)
}

func mustNew(t *testing.T, cfg Config) *Profile {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	node, svc, pod, gw, ext = "192.168.0.10", "10.96.0.10", "10.244.1.6", "10.244.1.1", "172.16.0.5"
	z                       = AntreaZoneV4
)

func TestGenericReportsZoneZeroAsIs(t *testing.T) {
	p := mustNew(t, Config{})
	c := conn(0, 6, ext+":1000", svc+":80", pod+":8080", gw+":2000", 0, 1)
	other := conn(5, 6, ext+":1001", pod+":80", "", "", 0, 2)
	out, st := poll(p, 0, nil, c, other)
	// Every entry is offered once per polled zone; the zone-5 one is the
	// kernel ignoring the zone filter.
	if len(out) != 1 || out[0] != c || st.WrongZone != 1 {
		t.Fatalf("out %+v stats %+v", out, st)
	}
}

func TestProtocolFilterNilAllEmptyNone(t *testing.T) {
	icmp := conn(0, 1, ext+":0", pod+":0", "", "", 0, 1)
	tcp := conn(0, 6, ext+":1", pod+":80", "", "", 0, 2)
	if out, _ := poll(mustNew(t, Config{}), 0, nil, icmp, tcp); len(out) != 2 {
		t.Fatalf("nil protocols must allow everything, got %d", len(out))
	}
	if out, st := poll(mustNew(t, Config{Protocols: []uint8{}}), 0, nil, icmp, tcp); len(out) != 0 || st.Protocol != 2 {
		t.Fatalf("empty protocols must allow nothing, got %d %+v", len(out), st)
	}
	if out, _ := poll(mustNew(t, Config{Protocols: []uint8{6}}), 0, nil, icmp, tcp); len(out) != 1 || out[0].Proto != 6 {
		t.Fatalf("[tcp] got %+v", out)
	}
}

func TestAntreaZonesAndCTMark(t *testing.T) {
	p := mustNew(t, Config{Name: Antrea})
	if zs := p.PollZones(); len(zs) != 3 || zs[0] != 0 || zs[1] != 65520 || zs[2] != 65510 {
		t.Fatalf("poll zones %v: zone 0 first, then 65520, 65510", zs)
	}
	committed := conn(z, 6, "10.244.1.7:1000", pod+":80", "", "", 0x3, 1)
	denied := conn(z, 6, "10.244.1.8:1000", pod+":80", "", "", 0x30, 2)
	out, st := poll(p, 0, nil, committed, denied)
	if len(out) != 1 || out[0].Src != committed.Src || st.CTMark != 1 {
		t.Fatalf("out %+v stats %+v", out, st)
	}
	if _, err := New(Config{Name: Antrea, Zones: []uint16{0}}); err == nil {
		t.Fatal("zone 0 in antrea zones accepted")
	}
	if _, err := New(Config{Name: "cilium"}); err == nil {
		t.Fatal("unknown profile accepted")
	}
}

func TestAntreaFromExternalCorrelation(t *testing.T) {
	p := mustNew(t, Config{Name: Antrea})
	zone0 := conn(0, 6, ext+":40000", node+":30080", pod+":8080", gw+":50000", 0, 10)
	cni := conn(z, 6, gw+":50000", pod+":8080", "", "", 1, 11)
	out, st := poll(p, 0, []string{node}, zone0, cni)
	if len(out) != 1 {
		t.Fatalf("want the one correlated connection, got %+v (stats %+v)", out, st)
	}
	c := out[0]
	if c.Src != ap(ext+":40000").Addr() || c.SrcPort != 40000 || c.Dst != ap(pod+":8080").Addr() ||
		c.OrigDst != ap(node+":30080").Addr() || c.OrigDstPort != 30080 || c.SNATAddr != ap(gw+":1").Addr() || c.SNATPort != 50000 || c.Zone != z {
		t.Fatalf("correlated connection %+v", c)
	}
}

func TestAntreaNoSNATKeyUsesClientPort(t *testing.T) {
	// externalTrafficPolicy=Local: no SNAT; the CNI entry keeps the client
	// address and port, which key the correlation.
	p := mustNew(t, Config{Name: Antrea})
	zone0 := conn(0, 6, ext+":40001", node+":30080", pod+":8080", ext+":40001", 0, 1)
	cni := conn(z, 6, ext+":40001", pod+":8080", "", "", 1, 2)
	out, _ := poll(p, 0, nil, zone0, cni)
	if len(out) != 1 || out[0].SNATAddr.IsValid() || out[0].SNATPort != 0 || out[0].OrigDstPort != 30080 {
		t.Fatalf("got %+v, want the correlated connection without SNAT", out)
	}
}

func TestAntreaNoCollisions(t *testing.T) {
	p := mustNew(t, Config{Name: Antrea})
	// Same SNAT port, different destination port / protocol.
	a0 := conn(0, 6, ext+":1000", node+":30080", pod+":8080", gw+":50000", 0, 1)
	a := conn(z, 6, gw+":50000", pod+":8080", "", "", 1, 2)
	b := conn(z, 6, gw+":50000", pod+":9090", "", "", 1, 3)
	c := conn(z, 17, gw+":50000", pod+":8080", "", "", 1, 4)
	// Two clients sharing a source port.
	d0 := conn(0, 6, "172.16.0.6:1000", node+":30080", pod+":8080", gw+":50001", 0, 5)
	d := conn(z, 6, gw+":50001", pod+":8080", "", "", 1, 6)
	out, _ := poll(p, 0, nil, a0, a, b, c, d0, d)
	got := map[uint32]store.Conn{}
	for _, o := range out {
		got[o.ID] = o
	}
	if got[2].Src != netip.MustParseAddr(ext) || got[6].Src != netip.MustParseAddr("172.16.0.6") {
		t.Fatalf("correlation wrong: %+v", out)
	}
	if got[3].Src != netip.MustParseAddr(gw) || got[4].Src != netip.MustParseAddr(gw) {
		t.Fatalf("entries with another destination port or protocol were correlated: %+v", out)
	}
}

func TestAntreaHostOriginatedAndUncorrelated(t *testing.T) {
	p := mustNew(t, Config{Name: Antrea})
	host := conn(0, 6, node+":41000", "10.244.2.7:80", "", "", 0, 1)    // host → remote Pod: zone 0 only
	transit := conn(0, 6, ext+":1234", "192.168.0.99:22", "", "", 0, 2) // neither the host's nor NAT'd
	out, st := poll(p, 0, []string{node}, host, transit)
	if len(out) != 1 || out[0].ID != 1 || out[0].Zone != 0 || st.Uncorrelated != 1 {
		t.Fatalf("out %+v stats %+v", out, st)
	}
}

// TestAntreaMappingOutlivesZoneZero is Antrea issue #8260: host → ClusterIP, the host's
// zone-0 entry expires while the Antrea-zone entry lives on.
func TestAntreaMappingOutlivesZoneZero(t *testing.T) {
	p := mustNew(t, Config{Name: Antrea})
	zone0 := conn(0, 6, node+":40950", svc+":80", pod+":8080", gw+":12254", 0, 1)
	cni := conn(z, 6, gw+":12254", pod+":8080", "", "", 1, 2)
	first, _ := poll(p, 0, []string{node}, zone0, cni)
	if len(first) != 1 || first[0].Src != netip.MustParseAddr(node) {
		t.Fatalf("first poll: %+v (the host's zone-0 entry and the CNI entry are one connection)", first)
	}
	later, _ := poll(p, 5*time.Second, []string{node}, cni)
	if len(later) != 1 || later[0].Key != first[0].Key || later[0].OrigDst != netip.MustParseAddr(svc) {
		t.Fatalf("after the zone-0 entry expired: %+v, want the same connection %+v", later, first[0].Key)
	}
	// A DESTROY of the zone-0 entry does not end the connection; one of the
	// CNI entry ends it under the client key.
	ev0 := zone0
	if p.Event(&ev0) {
		t.Fatal("zone-0 DESTROY of a connection the CNI zone carries was accepted")
	}
	evCNI := cni
	if !p.Event(&evCNI) || evCNI.Key != first[0].Key {
		t.Fatalf("CNI DESTROY: %+v, want key %+v", evCNI.Key, first[0].Key)
	}
	// The tuple reused by a new connection (new conntrack ID) is not mapped.
	reused := cni
	reused.ID = 99
	out, _ := poll(p, 10*time.Second, []string{node}, reused)
	if len(out) != 1 || out[0].Src != netip.MustParseAddr(gw) {
		t.Fatalf("reused tuple inherited the old mapping: %+v", out)
	}
	// Mappings expire mappingTTL after their CNI entry was last seen.
	poll(p, 10*time.Second+2*mappingTTL, nil)
	if len(p.mappings) != 0 || len(p.clients) != 0 {
		t.Fatalf("mappings not purged: %d %d", len(p.mappings), len(p.clients))
	}
}
