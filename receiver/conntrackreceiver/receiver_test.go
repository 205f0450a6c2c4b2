//go:build integration

package conntrackreceiver

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
)

type family struct {
	name                          string
	cli, nodeSrv, srv, clusterIP  string
	ipHeader, udpHeader, maxTCPHd uint64
}

var families = []family{
	{"ipv4", cliV4, nodeSrvV4, srvV4, clusterIPV4, 20, 8, 60},
	{"ipv6", cliV6, nodeSrvV6, srvV6, clusterIPV6, 40, 8, 80},
}

func hostPort(a string, p string) string { return net.JoinHostPort(a, p) }

func fromPort(ap netip.AddrPort) func(*flowrecord.Record) bool {
	return func(r *flowrecord.Record) bool { return r.Source.Address == ap.Addr() && r.Source.Port == ap.Port() }
}

// checkDeltas: the deltas of a connection's records add up to its totals.
func checkDeltas(t *testing.T, rs []flowrecord.Record) {
	t.Helper()
	var o, rp, ob, rb uint64
	for _, r := range rs {
		o, rp, ob, rb = o+r.Stats.PacketDelta, rp+r.ReverseStats.PacketDelta, ob+r.Stats.OctetDelta, rb+r.ReverseStats.OctetDelta
	}
	last := rs[len(rs)-1]
	if o != last.Stats.PacketTotal || rp != last.ReverseStats.PacketTotal || ob != last.Stats.OctetTotal || rb != last.ReverseStats.OctetTotal {
		t.Fatalf("deltas sum to %d/%d pkts %d/%d bytes, totals are %d/%d pkts %d/%d bytes\n%s", o, rp, ob, rb,
			last.Stats.PacketTotal, last.ReverseStats.PacketTotal, last.Stats.OctetTotal, last.ReverseStats.OctetTotal, describe(rs))
	}
}

// TestTCPThroughClusterIPWithMasquerade follows one real TCP connection
// client → ClusterIP (DNAT) → server (MASQUERADE) through its life.
func TestTCPThroughClusterIPWithMasquerade(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newLab(t)
			l.kubeProxy()
			l.both("-t", "mangle", "-A", "PREROUTING", "-p", "tcp", "-j", "CONNMARK", "--set-mark", "0x42")
			ln := l.listenTCP(l.srv, hostPort(f.srv, "8080"))
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait)
			wg.Add(1)
			go func() { // server: read 1000, answer 2000, read 3000, answer 500, close on EOF
				defer wg.Done()
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 3000)
				for _, step := range [][2]int{{1000, 2000}, {3000, 500}} {
					if _, err := io.ReadFull(c, buf[:step[0]]); err != nil {
						return
					}
					if _, err := c.Write(make([]byte, step[1])); err != nil {
						return
					}
				}
				_, _ = io.Copy(io.Discard, c)
			}()
			h := startReceiver(t, testConfig(l.path(l.node)))

			c := l.dialTCP(l.cli, hostPort(f.clusterIP, "80"))
			client := addrPort(t, c.LocalAddr())
			exchange := func(send, want int) {
				if _, err := c.Write(make([]byte, send)); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, make([]byte, want)); err != nil {
					t.Fatal(err)
				}
			}
			exchange(1000, 2000)
			first := h.waitFor("the first active record", fromPort(client), hasReason(flowrecord.EndReasonActiveTimeout))[0]
			want := netip.MustParseAddr
			if first.Destination.Address != want(f.srv) || first.Destination.Port != 8080 ||
				first.OriginalDestinationAddress != want(f.clusterIP) || first.OriginalDestinationPort != 80 ||
				first.ProxySNATAddress != want(f.nodeSrv) || first.ProxySNATPort == 0 ||
				first.Protocol != 6 || first.TCPState != "ESTABLISHED" || first.Conntrack.Mark != 0x42 || first.Conntrack.Zone != 0 ||
				first.Reporter.NodeName != "node-a" || first.Start.IsZero() || first.Conntrack.ID == 0 {
				t.Fatalf("first record wrong:\n%s", describe([]flowrecord.Record{first}))
			}
			if first.Stats.PacketDelta != first.Stats.PacketTotal || first.Source.Kind != flowrecord.EndpointUnknown || first.Key != "" || first.Reporter.Side != flowrecord.SideUnknown {
				t.Fatalf("first record: deltas must equal totals, and Kind/Key/Side stay unset: %+v", first)
			}
			checkPayload(t, f, first.Stats, 1000)
			checkPayload(t, f, first.ReverseStats, 2000)

			exchange(3000, 500)
			c.Close()
			h.waitFor("the end-of-flow record", fromPort(client), hasReason(flowrecord.EndReasonEndOfFlow))
			time.Sleep(time.Second) // nothing may follow the end of flow
			rs := h.waitFor("all records", fromPort(client), func([]flowrecord.Record) bool { return true })
			last := rs[len(rs)-1]
			if last.EndReason != flowrecord.EndReasonEndOfFlow || (last.TCPState != "TIME_WAIT" && last.TCPState != "CLOSE") {
				t.Fatalf("last record must be the one end-of-flow record in TIME_WAIT/CLOSE:\n%s", describe(rs))
			}
			for _, r := range rs[:len(rs)-1] {
				if r.EndReason == flowrecord.EndReasonEndOfFlow {
					t.Fatalf("two end-of-flow records:\n%s", describe(rs))
				}
				if r.Source.Address != last.Source.Address || r.Source.Port != last.Source.Port || r.Destination.Address != last.Destination.Address || r.Destination.Port != last.Destination.Port || r.Conntrack.ID != last.Conntrack.ID {
					t.Fatalf("records of one connection disagree on its identity:\n%s", describe(rs))
				}
			}
			checkPayload(t, f, last.Stats, 4000)
			checkPayload(t, f, last.ReverseStats, 2500)
			checkDeltas(t, rs)
			if !last.End.After(first.Start) || last.End.After(time.Now()) {
				t.Fatalf("end %v not within the connection's life (start %v)", last.End, first.Start)
			}
		})
	}
}

// checkPayload: the octet counter is the payload plus one IP+TCP header per
// packet (with options): payload + packets × [ip+20, ip+maxTCP].
func checkPayload(t *testing.T, f family, c flowrecord.Counters, payload uint64) {
	t.Helper()
	lo, hi := payload+c.PacketTotal*(f.ipHeader+20), payload+c.PacketTotal*(f.ipHeader+f.maxTCPHd)
	if c.PacketTotal == 0 || c.OctetTotal < lo || c.OctetTotal > hi {
		t.Fatalf("%d packets / %d bytes for a %d-byte payload: want bytes within [%d, %d]", c.PacketTotal, c.OctetTotal, payload, lo, hi)
	}
}

// TestUDPCountersIdleAndVanished: exact UDP counters, an idle record when
// traffic stops, and a final record when the idle entry leaves conntrack
// (Antrea sends none there).
func TestUDPCountersIdleAndVanished(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newLab(t)
			l.kubeProxy()
			srv := l.listenUDP(l.srv, hostPort(f.srv, "5353"))
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait)
			wg.Add(1)
			go func() { // echo
				defer wg.Done()
				buf := make([]byte, 2048)
				for {
					n, from, err := srv.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = srv.WriteTo(buf[:n], from)
				}
			}()
			t.Cleanup(func() { srv.Close() })
			h := startReceiver(t, testConfig(l.path(l.node)))
			c := l.dialUDP(l.cli, hostPort(f.clusterIP, "53"))
			client := addrPort(t, c.LocalAddr())
			const n, size = 5, 100
			buf := make([]byte, size)
			for range n {
				if _, err := c.Write(buf); err != nil {
					t.Fatal(err)
				}
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			rs := h.waitFor("an idle record", fromPort(client), hasReason(flowrecord.EndReasonIdleTimeout))
			a := rs[0]
			wantBytes := uint64(n * (size + f.ipHeader + f.udpHeader))
			if a.EndReason != flowrecord.EndReasonActiveTimeout || a.Stats.PacketTotal != n || a.ReverseStats.PacketTotal != n ||
				a.Stats.OctetTotal != wantBytes || a.ReverseStats.OctetTotal != wantBytes || a.Protocol != 17 || a.TCPState != "" ||
				a.OriginalDestinationPort != 53 || a.Destination.Port != 5353 || a.ProxySNATAddress != netip.MustParseAddr(f.nodeSrv) {
				t.Fatalf("want an active record with %d packets and %d bytes each way first:\n%s", n, wantBytes, describe(rs))
			}
			idle := rs[len(rs)-1]
			if idle.Stats.PacketDelta != 0 || idle.ReverseStats.OctetDelta != 0 || idle.Stats.PacketTotal != n {
				t.Fatalf("idle record must carry zero deltas:\n%s", describe(rs))
			}
			// The entry leaves the table (as on UDP timeout) while idle.
			if deleted := deleteEntries(t, l.path(l.node), func(fl *conntrack.Flow) bool {
				return fl.TupleOrig.Proto.SourcePort == client.Port() && fl.TupleOrig.IP.SourceAddress.Unmap() == client.Addr()
			}); deleted != 1 {
				t.Fatalf("deleted %d entries, want 1", deleted)
			}
			rs = h.waitFor("the final record", fromPort(client), hasReason(flowrecord.EndReasonEndOfFlow))
			if fin := rs[len(rs)-1]; fin.EndReason != flowrecord.EndReasonEndOfFlow || fin.Stats.PacketTotal != n || fin.Stats.PacketDelta != 0 {
				t.Fatalf("final record wrong:\n%s", describe(rs))
			}
			checkDeltas(t, rs)
		})
	}
}

// deleteEntries deletes the conntrack entries of netns that match.
func deleteEntries(t *testing.T, netns string, match func(*conntrack.Flow) bool) int {
	t.Helper()
	c := dialCT(t, netns)
	flows, err := c.Dump(nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for i := range flows {
		if match(&flows[i]) {
			if err := c.Delete(flows[i]); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

func dialCT(t *testing.T, netns string) *conntrack.Conn {
	t.Helper()
	ns, err := ctsource.OpenNamespace(netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	c, err := conntrack.Dial(&netlink.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
