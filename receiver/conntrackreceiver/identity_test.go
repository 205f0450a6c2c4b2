//go:build integration

package conntrackreceiver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/testbed/peer"
)

// Which kernel conntrack entry is which connection, with real traffic: a
// tuple reused by a new connection (UDP after its timeout, a SYN on a
// TIME_WAIT entry) is a second connection, and concurrent pings between the
// same hosts are as many connections as they have identifiers.

// track makes the Node namespace's netfilter track connections without NAT:
// conntrack hooks a namespace only once a rule needs it.
func (l *lab) track() {
	// Counters and start times from the first packet on: the receiver turns
	// them on only when it starts, and these tests open connections before.
	// Likewise DESTROY events: by default the kernel sends them only for
	// entries created while someone listened.
	l.in(l.node, "sysctl", "-qw", "net.netfilter.nf_conntrack_acct=1", "net.netfilter.nf_conntrack_timestamp=1", "net.netfilter.nf_conntrack_events=1")
	l.both("-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW,ESTABLISHED,RELATED", "-j", "ACCEPT")
}

// connID is what tells two conntrack entries of one tuple apart: the ID
// (a hash, which a new entry reusing the old one's memory repeats) and the
// start time.
type connID struct {
	id    uint32
	start time.Time
}

// byConnection groups records by connection, in the order they first appear.
func byConnection(rs []flowrecord.Record) (ids []connID, chains map[connID][]flowrecord.Record) {
	chains = make(map[connID][]flowrecord.Record)
	for _, r := range rs {
		k := connID{r.Conntrack.ID, r.Start}
		if _, ok := chains[k]; !ok {
			ids = append(ids, k)
		}
		chains[k] = append(chains[k], r)
	}
	return ids, chains
}

// twoChains waits until the records matching match form two connections,
// the first ended (end of flow) and the second's latest record satisfying
// secondDone, and returns both chains.
func twoChains(h *harness, what string, match func(*flowrecord.Record) bool, secondDone func(*flowrecord.Record) bool) (first, second []flowrecord.Record) {
	h.t.Helper()
	h.waitFor(what, match, func(rs []flowrecord.Record) bool {
		ids, chains := byConnection(rs)
		if len(ids) != 2 {
			return false
		}
		a, b := chains[ids[0]], chains[ids[1]]
		return a[len(a)-1].EndReason == flowrecord.EndReasonEndOfFlow && secondDone(&b[len(b)-1])
	})
	time.Sleep(500 * time.Millisecond) // anything wrong that follows shows too
	rs := h.waitFor(what, match, func([]flowrecord.Record) bool { return true })
	ids, chains := byConnection(rs)
	if len(ids) != 2 {
		h.t.Fatalf("%s: want two connections (conntrack ID and start):\n%s", what, describe(rs))
	}
	return chains[ids[0]], chains[ids[1]]
}

// checkChain: one connection's records have one end of flow at most, as the
// last record, and deltas that add up to its totals.
func checkChain(t *testing.T, rs []flowrecord.Record) {
	t.Helper()
	for i, r := range rs {
		if r.EndReason == flowrecord.EndReasonEndOfFlow && i != len(rs)-1 {
			t.Fatalf("a record follows the end of flow:\n%s", describe(rs))
		}
	}
	checkDeltas(t, rs)
}

func TestUDPTupleReusedAfterTimeoutIsANewConnection(t *testing.T) {
	for _, f := range families {
		for _, events := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/events=%v", f.name, events), func(t *testing.T) {
				l := newLab(t)
				l.track()
				// The entry of an idle UDP flow expires after 1 s.
				l.in(l.node, "sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout=1", "net.netfilter.nf_conntrack_udp_timeout_stream=1")
				srv := l.listenUDP(l.srv, hostPort(f.srv, "5353"))
				t.Cleanup(func() { srv.Close() })
				c := l.dialUDP(l.cli, hostPort(f.srv, "5353")) // one socket: one fixed source port
				client := addrPort(t, c.LocalAddr())
				send := func(n, size int) {
					for range n {
						if _, err := c.Write(make([]byte, size)); err != nil {
							t.Fatal(err)
						}
					}
				}
				send(3, 50)
				// The expiry counts from the last packet the Node saw (the
				// client may hold packets back while it resolves neighbours).
				waitEntry(t, l.path(l.node), client, 3)
				cfg := testConfig(l.path(l.node))
				cfg.PollInterval = 5 * time.Second // no poll between the two flows
				cfg.Events = events
				h := startReceiver(t, cfg)
				time.Sleep(1500 * time.Millisecond) // the first poll saw the first flow; its entry expired
				send(1, 70)                         // a new entry on the same tuple
				// Its next packet keeps it until the next poll.
				l.in(l.node, "sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout=30", "net.netfilter.nf_conntrack_udp_timeout_stream=30")
				send(1, 70)

				first, second := twoChains(h, "the two flows", fromPort(client),
					func(r *flowrecord.Record) bool { return r.Stats.PacketTotal == 2 })
				last := first[len(first)-1]
				if last.EndReason != flowrecord.EndReasonEndOfFlow || last.Stats.PacketTotal != 3 || last.Stats.OctetTotal != 3*(50+f.ipHeader+f.udpHeader) {
					t.Fatalf("the first flow must end with its own 3 packets:\n%s", describe(first))
				}
				if s := second[0]; s.Stats.PacketDelta != 2 || s.Stats.OctetTotal != 2*(70+f.ipHeader+f.udpHeader) || !s.Start.After(first[0].Start) {
					t.Fatalf("the second flow must start with its own start time and counters:\n%s", describe(second))
				}
				checkChain(t, first)
				checkChain(t, second)
			})
		}
	}
}

// waitEntry waits until the conntrack entry from client has counted packets.
func waitEntry(t *testing.T, netns string, client netip.AddrPort, packets uint64) {
	t.Helper()
	c := dialCT(t, netns)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		flows, err := c.Dump(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			if f.TupleOrig.IP.SourceAddress.Unmap() == client.Addr() && f.TupleOrig.Proto.SourcePort == client.Port() && f.CountersOrig.Packets == packets {
				return
			}
		}
	}
	t.Fatalf("no conntrack entry from %v with %d packets", client, packets)
}

// dialFrom dials addr from a fixed local port (SO_REUSEADDR, so that the port
// can be bound again while conntrack still holds the previous connection).
func (l *lab) dialFrom(ns, local, addr string) net.Conn {
	l.t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) })
		return errors.Join(err, serr)
	}}
	lp, err := net.ResolveTCPAddr("tcp", local)
	if err != nil {
		l.t.Fatal(err)
	}
	d.LocalAddr = lp
	var c net.Conn
	l.do(ns, func() (err error) { c, err = d.Dial("tcp", addr); return err })
	l.t.Cleanup(func() { c.Close() })
	return c
}

func TestTCPSynOnTimeWaitTupleIsANewConnection(t *testing.T) {
	for _, f := range families {
		for _, events := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/events=%v", f.name, events), func(t *testing.T) {
				l := newLab(t)
				l.track()
				ln := l.listenTCP(l.srv, hostPort(f.srv, "8080"))
				closeFirst := make(chan struct{})
				var closeOnce sync.Once
				t.Cleanup(func() { closeOnce.Do(func() { close(closeFirst) }) })
				var wg sync.WaitGroup
				t.Cleanup(wg.Wait)
				t.Cleanup(func() { ln.Close() }) // before wg.Wait: ends the Accept loop
				wg.Add(1)
				go func() { // server: read 1000, answer 500; close the first connection first (its TIME_WAIT)
					defer wg.Done()
					for i := 0; ; i++ {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						if _, err := io.ReadFull(c, make([]byte, 1000)); err == nil {
							_, _ = c.Write(make([]byte, 500))
						}
						if i == 0 {
							<-closeFirst
						} else {
							_, _ = io.Copy(io.Discard, c)
						}
						c.Close()
					}
				}()
				exchange := func(c net.Conn) {
					if _, err := c.Write(make([]byte, 1000)); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(c, make([]byte, 500)); err != nil {
						t.Fatal(err)
					}
				}
				local := hostPort(f.cli, "41234")
				c := l.dialFrom(l.cli, local, hostPort(f.srv, "8080"))
				client := addrPort(t, c.LocalAddr())
				exchange(c)
				cfg := testConfig(l.path(l.node))
				cfg.PollInterval = 5 * time.Second // no poll between the two connections
				cfg.Events = events
				h := startReceiver(t, cfg)
				time.Sleep(500 * time.Millisecond) // the first poll saw the first connection

				closeOnce.Do(func() { close(closeFirst) }) // the server closes first: FIN, FIN, ACK — conntrack TIME_WAIT
				if _, err := io.Copy(io.Discard, c); err != nil {
					t.Fatal(err)
				}
				c.Close()
				time.Sleep(100 * time.Millisecond)
				c2 := l.dialFrom(l.cli, local, hostPort(f.srv, "8080")) // a SYN on the TIME_WAIT entry
				exchange(c2)

				first, second := twoChains(h, "the two connections", fromPort(client), func(r *flowrecord.Record) bool {
					return r.Stats.OctetTotal >= 1000 && r.ReverseStats.OctetTotal >= 500
				})
				last := first[len(first)-1]
				if last.EndReason != flowrecord.EndReasonEndOfFlow || (events && last.TCPState != "TIME_WAIT") {
					t.Fatalf("the first connection must end (in TIME_WAIT, from its DESTROY event, with events):\n%s", describe(first))
				}
				checkPayload(t, f, last.Stats, 1000)
				checkPayload(t, f, last.ReverseStats, 500)
				s := second[len(second)-1]
				if second[0].Stats.PacketDelta != second[0].Stats.PacketTotal || !second[0].Start.After(first[0].Start) {
					t.Fatalf("the second connection must start with its own start time and counters:\n%s", describe(second))
				}
				checkPayload(t, f, s.Stats, 1000)
				checkPayload(t, f, s.ReverseStats, 500)
				checkChain(t, first)
				checkChain(t, second)
			})
		}
	}
}

func TestConcurrentPingsAreTwoConnections(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newLab(t)
			l.track()
			h := startReceiver(t, testConfig(l.path(l.node)))
			const size = 56
			pings := []struct {
				id    uint16
				count int
			}{{0x1111, 5}, {0x2222, 3}}
			// Both conversations run at once, interleaved (testbed/cmd/flowpeer's ping).
			bin := peer.Build(t)
			var wg sync.WaitGroup
			outs := make([][]byte, len(pings))
			errs := make([]error, len(pings))
			for i, pg := range pings {
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i], errs[i] = exec.Command("ip", "netns", "exec", l.cli, bin, "ping", "-to", f.srv,
						"-id", fmt.Sprint(pg.id), "-count", fmt.Sprint(pg.count), "-size", fmt.Sprint(size)).CombinedOutput()
				}()
			}
			wg.Wait()
			for i := range pings {
				if errs[i] != nil {
					t.Fatalf("ping id %#x: %v\n%s", pings[i].id, errs[i], outs[i])
				}
			}
			proto, echoType := uint8(1), uint8(8)
			if f.name == "ipv6" {
				proto, echoType = 58, 128
			}
			cli := netip.MustParseAddr(f.cli)
			isPing := func(r *flowrecord.Record) bool { return r.Protocol == proto && r.Source.Address == cli }
			rs := h.waitFor("an idle record of each ping", isPing, func(rs []flowrecord.Record) bool {
				idle := map[uint16]bool{}
				for _, r := range rs {
					idle[r.ICMP.ID] = idle[r.ICMP.ID] || r.EndReason == flowrecord.EndReasonIdleTimeout
				}
				return len(idle) == 2 && idle[0x1111] && idle[0x2222]
			})
			keys := map[string]bool{}
			for _, pg := range pings {
				var chain []flowrecord.Record
				for _, r := range rs {
					if r.ICMP.ID == pg.id {
						chain = append(chain, r)
					}
				}
				n, bytes := uint64(pg.count), uint64(pg.count)*(f.ipHeader+8+size)
				last := chain[len(chain)-1]
				if last.ICMP.Type != echoType || last.ICMP.Code != 0 || last.Stats.PacketTotal != n || last.ReverseStats.PacketTotal != n ||
					last.Stats.OctetTotal != bytes || last.ReverseStats.OctetTotal != bytes {
					t.Fatalf("ping id %#x: want type %d and %d echoes (%d bytes) each way:\n%s", pg.id, echoType, n, bytes, describe(chain))
				}
				checkChain(t, chain)
				keys[last.CorrelationKey()] = true
			}
			if len(keys) != 2 {
				t.Fatalf("the two pings share a correlation key: %v", keys)
			}
		})
	}
}
