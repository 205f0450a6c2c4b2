//go:build integration

package conntrackreceiver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/profile"
)

// entry describes a conntrack entry to create through netlink: original
// tuple src→dst, reply tuple rsrc→rdst.
type entry struct {
	proto                uint8
	src, dst, rsrc, rdst string // "addr:port"
	zone                 uint16
	mark                 uint32
}

func createEntries(t *testing.T, netns string, es ...entry) []conntrack.Flow {
	t.Helper()
	c := dialCT(t, netns)
	var out []conntrack.Flow
	for _, e := range es {
		s, d := netip.MustParseAddrPort(e.src), netip.MustParseAddrPort(e.dst)
		f := conntrack.NewFlow(e.proto, 0, s.Addr(), d.Addr(), s.Port(), d.Port(), 600, e.mark)
		if e.rsrc != "" {
			rs, rd := netip.MustParseAddrPort(e.rsrc), netip.MustParseAddrPort(e.rdst)
			f.TupleReply.IP.SourceAddress, f.TupleReply.Proto.SourcePort = rs.Addr(), rs.Port()
			f.TupleReply.IP.DestinationAddress, f.TupleReply.Proto.DestinationPort = rd.Addr(), rd.Port()
		}
		f.Zone = e.zone
		if e.proto == 6 {
			f.ProtoInfo.TCP = &conntrack.ProtoInfoTCP{State: 3}
		}
		if err := c.Create(f); err != nil {
			t.Fatalf("create %+v: %v", e, err)
		}
		out = append(out, f)
	}
	return out
}

func deleteFlow(t *testing.T, netns string, f conntrack.Flow) {
	t.Helper()
	if err := dialCT(t, netns).Delete(f); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// TestAntreaProfileIssue8260 recreates, in a Node namespace, the conntrack
// state of Antrea's host → ClusterIP connection (Antrea issue #8260): the host's zone-0
// entry (node IP → ClusterIP, DNAT to the Pod, SNAT to the gateway) and the
// Antrea-zone entry of the post-SNAT packet (gateway:SNAT port → Pod). The
// connection must be reported once, under its real source, also after the
// zone-0 entry expired first (decision D5); and its final record too.
func TestAntreaProfileIssue8260(t *testing.T) {
	l := newLab(t)
	node := l.path(l.node)
	l.in(l.node, "ip", "addr", "add", "10.201.9.1/32", "dev", "lo") // the Node's own address
	const (
		nodeIP, clusterIP, pod, gw = "10.201.9.1", "10.96.0.10", "10.244.1.6", "10.244.1.1"
		ext, remotePod             = "10.201.1.2", "10.244.2.7"
	)
	fs := createEntries(t, node,
		// Antrea issue #8260: zone 0 and the Antrea zone
		entry{proto: 6, src: nodeIP + ":40950", dst: clusterIP + ":80", rsrc: pod + ":8080", rdst: gw + ":12254"},
		entry{proto: 6, src: gw + ":12254", dst: pod + ":8080", zone: profile.AntreaZoneV4, mark: 0x1},
		// from external through a NodePort, SNAT to the gateway
		entry{proto: 6, src: ext + ":33333", dst: nodeIP + ":30080", rsrc: pod + ":8080", rdst: gw + ":23456"},
		entry{proto: 6, src: gw + ":23456", dst: pod + ":8080", zone: profile.AntreaZoneV4, mark: 0x2},
		// the host → a remote Pod: only a zone-0 entry exists (D2)
		entry{proto: 6, src: nodeIP + ":41000", dst: remotePod + ":80"},
		// not reported: an Antrea-zone entry without the policy ct_mark, and
		// a zone-0 entry that is neither the host's nor NAT'd
		entry{proto: 6, src: "10.244.1.9:5000", dst: pod + ":8080", zone: profile.AntreaZoneV4},
		entry{proto: 17, src: ext + ":5555", dst: "10.201.2.2:9999"},
	)
	seedZone0, seedCNI := fs[0], fs[1]

	cfg := testConfig(node)
	cfg.Profile = profile.Antrea
	h := startReceiver(t, cfg)
	any := func(*flowrecord.Record) bool { return true }
	src := func(a string) func(*flowrecord.Record) bool {
		ap := netip.MustParseAddrPort(a)
		return func(r *flowrecord.Record) bool { return r.Source.Address == ap.Addr() && r.Source.Port == ap.Port() }
	}
	nonEmpty := func(rs []flowrecord.Record) bool { return len(rs) > 0 }

	seed := h.waitFor("the seed connection", src(nodeIP+":40950"), nonEmpty)[0]
	if seed.Destination.Address != netip.MustParseAddr(pod) || seed.Destination.Port != 8080 ||
		seed.OriginalDestinationAddress != netip.MustParseAddr(clusterIP) || seed.OriginalDestinationPort != 80 ||
		seed.ProxySNATAddress != netip.MustParseAddr(gw) || seed.ProxySNATPort != 12254 ||
		seed.Conntrack.Zone != profile.AntreaZoneV4 || seed.Conntrack.Mark != 1 || seed.EndReason != flowrecord.EndReasonActiveTimeout {
		t.Fatalf("seed connection record wrong:\n%s", describe([]flowrecord.Record{seed}))
	}
	fromExt := h.waitFor("the from-external connection", src(ext+":33333"), nonEmpty)[0]
	if fromExt.OriginalDestinationAddress != netip.MustParseAddr(nodeIP) || fromExt.OriginalDestinationPort != 30080 ||
		fromExt.ProxySNATPort != 23456 || fromExt.Destination.Address != netip.MustParseAddr(pod) {
		t.Fatalf("from-external record wrong:\n%s", describe([]flowrecord.Record{fromExt}))
	}
	host := h.waitFor("the host → remote Pod connection", src(nodeIP+":41000"), nonEmpty)[0]
	if host.Conntrack.Zone != 0 || host.Destination.Address != netip.MustParseAddr(remotePod) {
		t.Fatalf("host-originated record wrong:\n%s", describe([]flowrecord.Record{host}))
	}

	// The zone-0 entry expires first; the Antrea-zone entry lives on.
	deleteFlow(t, node, seedZone0)
	time.Sleep(3 * cfg.ActiveTimeout)
	deleteFlow(t, node, seedCNI)
	rs := h.waitFor("the seed connection's end", src(nodeIP+":40950"), hasReason(flowrecord.EndReasonEndOfFlow))
	ends := 0
	for _, r := range rs {
		if r.EndReason == flowrecord.EndReasonEndOfFlow {
			ends++
		}
	}
	if ends != 1 || rs[len(rs)-1].EndReason != flowrecord.EndReasonEndOfFlow {
		t.Fatalf("want one record chain ending in one end-of-flow record:\n%s", describe(rs))
	}
	time.Sleep(500 * time.Millisecond)
	all := h.waitFor("all records", any, nonEmpty)
	for _, r := range all {
		switch {
		case r.Source.Address == netip.MustParseAddr(gw):
			t.Fatalf("a connection was reported under its post-SNAT tuple:\n%s", describe(all))
		case r.Source.Address == netip.MustParseAddr("10.244.1.9"):
			t.Fatalf("an Antrea-zone entry without policy ct_mark was reported:\n%s", describe(all))
		case r.Protocol == 17:
			t.Fatalf("a zone-0 entry that is neither the host's nor NAT'd was reported:\n%s", describe(all))
		}
	}
	if h.counter("otelcol_receiver_conntrack_entries_filtered", "ct_mark") == 0 || h.counter("otelcol_receiver_conntrack_entries_filtered", "uncorrelated") == 0 {
		t.Fatal("filtered entries were not counted")
	}
}

// TestZonesAndProtocols: a CT --zone rule puts UDP in zone 65520; the
// generic profile with zones [65520] reports those and nothing from zone 0.
// SCTP entries (created through netlink: this kernel has no SCTP sockets)
// are reported, and a protocols list leaves them out, counted.
func TestZonesAndProtocols(t *testing.T) {
	l := newLab(t)
	node := l.path(l.node)
	l.kubeProxy()
	l.both("-t", "raw", "-A", "PREROUTING", "-p", "udp", "-j", "CT", "--zone", "65520")
	srv := l.listenUDP(l.srv, hostPort(srvV4, "5353"))
	t.Cleanup(func() { srv.Close() })
	createEntries(t, node,
		entry{proto: 132, src: "10.201.1.2:3868", dst: "10.201.2.2:3868", zone: 65520},
		entry{proto: 132, src: "10.201.1.2:2905", dst: "10.201.2.2:2905"},
		entry{proto: 6, src: "10.201.1.2:4000", dst: "10.201.2.2:80", zone: 65520},
	)

	cfg := testConfig(node)
	cfg.Zones = []uint16{65520}
	h := startReceiver(t, cfg)
	c := l.dialUDP(l.cli, hostPort(clusterIPV4, "53"))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	client := addrPort(t, c.LocalAddr())
	u := h.waitFor("the zoned UDP connection", fromPort(client), func(rs []flowrecord.Record) bool { return len(rs) > 0 })[0]
	if u.Conntrack.Zone != 65520 || u.Stats.PacketTotal != 1 || u.Stats.OctetTotal != 4+28 || u.Destination.Port != 5353 {
		t.Fatalf("zoned UDP record wrong:\n%s", describe([]flowrecord.Record{u}))
	}
	sctp := h.waitFor("the SCTP connection", func(r *flowrecord.Record) bool { return r.Protocol == 132 },
		func(rs []flowrecord.Record) bool { return len(rs) > 0 })
	if sctp[0].Source.Port != 3868 || sctp[0].Destination.Port != 3868 || sctp[0].Conntrack.Zone != 65520 {
		t.Fatalf("SCTP record wrong:\n%s", describe(sctp))
	}
	for _, r := range h.records() {
		if r.Conntrack.Zone != 65520 {
			t.Fatalf("a zone-%d entry was reported with zones [65520]:\n%s", r.Conntrack.Zone, describe([]flowrecord.Record{r}))
		}
	}
	h.stop()

	cfg.Protocols = []string{"udp", "tcp"}
	h = startReceiver(t, cfg)
	h.waitFor("the TCP entry", func(r *flowrecord.Record) bool { return r.Protocol == 6 }, func(rs []flowrecord.Record) bool { return len(rs) > 0 })
	for _, r := range h.records() {
		if r.Protocol == 132 {
			t.Fatalf("protocols [udp, tcp] reported SCTP")
		}
	}
	if h.counter("otelcol_receiver_conntrack_entries_filtered", "protocol") == 0 {
		t.Fatal("entries left out by the protocols list were not counted")
	}
}
