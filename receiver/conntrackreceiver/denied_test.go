//go:build integration

package conntrackreceiver

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

// denyRule makes the lab's Node a netfilter CNI enforcing a policy: packets
// to the server's port over proto are logged to NFLOG group with prefix,
// then dropped or rejected (action "DROP" or "REJECT"). Both rules carry the
// comment tag, by which ruleCounters finds them.
func (l *lab) denyRule(tool, proto, port string, group uint16, prefix, action, tag string) {
	match := []string{"-A", "FORWARD", "-p", proto, "--dport", port, "-m", "comment", "--comment", tag}
	l.in(l.node, append([]string{tool}, append(match, "-j", "NFLOG", "--nflog-group", strconv.Itoa(int(group)), "--nflog-prefix", prefix)...)...)
	l.in(l.node, append([]string{tool}, append(match, "-j", action)...)...)
}

// ruleCounters reads the kernel's packet and byte counters of the tagged
// rule whose target is action: what the rule really dropped.
func (l *lab) ruleCounters(tool, tag, action string) (packets, bytes uint64) {
	l.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", l.node, tool, "-v", "-S", "FORWARD").CombinedOutput()
	if err != nil {
		l.t.Fatalf("%s -v -S: %v\n%s", tool, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "--comment "+tag+" ") || !strings.Contains(line, "-j "+action) {
			continue
		}
		f := strings.Fields(line[strings.Index(line, " -c ")+4:])
		p, _ := strconv.ParseUint(f[0], 10, 64)
		b, _ := strconv.ParseUint(f[1], 10, 64)
		return p, b
	}
	l.t.Fatalf("no %s rule tagged %s:\n%s", action, tag, out)
	return 0, 0
}

func iptablesFor(f family) string {
	if f.name == "ipv6" {
		return "ip6tables"
	}
	return "iptables"
}

func deniedConfig(l *lab, d DeniedConfig) *Config {
	cfg := createDefaultConfig()
	cfg.NetNS = l.path(l.node)
	cfg.NodeName = "node-a"
	cfg.Denied = configoptional.Some(d)
	return cfg
}

func isDenied(r *flowrecord.Record) bool {
	return r.IngressPolicy.RuleAction != flowrecord.RuleActionNone || r.EgressPolicy.RuleAction != flowrecord.RuleActionNone
}

// sendUDP sends n datagrams of size bytes from one unconnected socket in the
// client namespace to addr (a REJECT's ICMP error does not fail sendto).
func (l *lab) sendUDP(addr string, n, size int) net.Addr {
	l.t.Helper()
	var local net.Addr
	l.do(l.cli, func() error {
		c, err := net.ListenPacket("udp", ":0")
		if err != nil {
			return err
		}
		defer c.Close()
		to, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		for range n {
			if _, err := c.WriteTo(make([]byte, size), to); err != nil {
				return err
			}
		}
		local = c.LocalAddr()
		return nil
	})
	return local
}

// TestDeniedConnections: the Node drops TCP to the server's 9090 (logged
// "drop ingress") and rejects UDP to its 9091 (logged "reject egress"). A
// client's connection attempt (its SYN and retransmissions) and its burst of
// datagrams each become exactly one denied record once idle, with the
// packets and bytes the kernel's DROP/REJECT rule counted, reverse counters 0,
// end of flow, and the rule's action on the policy of its direction.
func TestDeniedConnections(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newLab(t)
			ipt := iptablesFor(f)
			l.denyRule(ipt, "tcp", "9090", 33, "flowtel drop ingress", "DROP", "deny-tcp")
			l.denyRule(ipt, "udp", "9091", 33, "flowtel reject egress", "REJECT", "deny-udp")
			cfg := deniedConfig(l, DeniedConfig{NFLOGGroup: 33, IdleTimeout: 2 * time.Second, ActiveTimeout: time.Minute, MaxRecords: 100, MaxRate: 1000})
			h := startReceiver(t, cfg)

			l.do(l.cli, func() error {
				d := net.Dialer{Timeout: 2500 * time.Millisecond} // the SYN and one or two retransmissions
				c, err := d.Dial("tcp", hostPort(f.srv, "9090"))
				if err == nil {
					c.Close()
					return errors.New("connected through a DROP rule")
				}
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					return fmt.Errorf("want a timeout, got %w", err)
				}
				return nil
			})
			const datagrams, size = 5, 100
			udpSrc := addrPort(t, l.sendUDP(hostPort(f.srv, "9091"), datagrams, size))

			tcpMatch := func(r *flowrecord.Record) bool {
				return isDenied(r) && r.Protocol == 6 && r.Destination.Address.String() == f.srv && r.Destination.Port == 9090
			}
			udpMatch := func(r *flowrecord.Record) bool {
				return isDenied(r) && r.Protocol == 17 && r.Destination.Port == 9091 && r.Source.Port == udpSrc.Port()
			}
			one := func(rs []flowrecord.Record) bool { return len(rs) > 0 }
			h.waitFor("the denied TCP connection", tcpMatch, one)
			h.waitFor("the denied UDP flow", udpMatch, one)
			time.Sleep(cfg.Denied.Get().IdleTimeout + 1500*time.Millisecond) // nothing may follow
			tcp := h.waitFor("the denied TCP connection", tcpMatch, one)
			udp := h.waitFor("the denied UDP flow", udpMatch, one)

			tcpPkts, tcpBytes := l.ruleCounters(ipt, "deny-tcp", "DROP")
			udpPkts, udpBytes := l.ruleCounters(ipt, "deny-udp", "REJECT")
			if tcpPkts < 2 || udpPkts != datagrams || udpBytes != datagrams*(f.ipHeader+f.udpHeader+size) {
				t.Fatalf("the rules counted %d TCP packets, %d UDP packets / %d bytes: the test's traffic did not go as planned", tcpPkts, udpPkts, udpBytes)
			}
			for _, c := range []struct {
				name           string
				rs             []flowrecord.Record
				packets, bytes uint64
				ingress, eg    flowrecord.Policy
			}{
				{"tcp", tcp, tcpPkts, tcpBytes, flowrecord.Policy{RuleAction: flowrecord.RuleActionDrop}, flowrecord.Policy{}},
				{"udp", udp, udpPkts, udpBytes, flowrecord.Policy{}, flowrecord.Policy{RuleAction: flowrecord.RuleActionReject}},
			} {
				if len(c.rs) != 1 {
					t.Fatalf("%s: want exactly one denied record, got:\n%s", c.name, describe(c.rs))
				}
				r := c.rs[0]
				if r.Stats != (flowrecord.Counters{PacketTotal: c.packets, OctetTotal: c.bytes, PacketDelta: c.packets, OctetDelta: c.bytes}) ||
					r.ReverseStats != (flowrecord.Counters{}) || r.EndReason != flowrecord.EndReasonEndOfFlow || r.TCPState != "" ||
					r.IngressPolicy != c.ingress || r.EgressPolicy != c.eg || r.Source.Address.String() != f.cli ||
					r.Reporter.NodeName != "node-a" || r.Start.IsZero() || r.End.Before(r.Start) {
					t.Fatalf("%s: want %d packets / %d bytes (the rule's counters), reverse 0, end of flow, ingress %+v egress %+v; got %+v / %+v ingress %+v egress %+v\n%s",
						c.name, c.packets, c.bytes, c.ingress, c.eg, r.Stats, r.ReverseStats, r.IngressPolicy, r.EgressPolicy, describe(c.rs))
				}
			}
			if tcp[0].Source.Port == 0 || udp[0].Source.Port != udpSrc.Port() {
				t.Fatalf("source endpoints: tcp %v, udp %v (want %v)", tcp[0].Source, udp[0].Source, udpSrc)
			}
			if got, want := h.counter("otelcol_receiver_conntrack_denied_packets", "accounted"), int64(tcpPkts+udpPkts); got != want {
				t.Fatalf("accounted packets %d, want %d", got, want)
			}
			if n := h.counter("otelcol_receiver_conntrack_denied_packets", "lost"); n != 0 {
				t.Fatalf("%d packets lost", n)
			}
			if n := h.counter("otelcol_receiver_conntrack_denied_records", ""); n != 2 {
				t.Fatalf("denied records counted %d, want 2", n)
			}
		})
	}
}

// TestDeniedBounds: packets of new 5-tuples over max_records, and packets
// over max_rate, are not reported but counted, so that what the kernel's rule
// dropped equals what the receiver accounted plus what it shed.
func TestDeniedBounds(t *testing.T) {
	l := newLab(t)
	l.denyRule("iptables", "udp", "9091", 34, "drop egress", "DROP", "deny-udp")

	t.Run("max_records", func(t *testing.T) {
		h := startReceiver(t, deniedConfig(l, DeniedConfig{NFLOGGroup: 34, IdleTimeout: time.Second, ActiveTimeout: time.Minute, MaxRecords: 3}))
		before, _ := l.ruleCounters("iptables", "deny-udp", "DROP")
		for range 10 { // ten source ports: ten 5-tuples, two packets each
			l.sendUDP(hostPort(srvV4, "9091"), 2, 10)
		}
		match := func(r *flowrecord.Record) bool { return isDenied(r) && r.Destination.Port == 9091 }
		h.waitFor("three denied records", match, func(rs []flowrecord.Record) bool { return len(rs) >= 3 })
		time.Sleep(2 * time.Second)
		rs := h.waitFor("three denied records", match, func([]flowrecord.Record) bool { return true })
		after, _ := l.ruleCounters("iptables", "deny-udp", "DROP")
		accounted, shed := h.counter("otelcol_receiver_conntrack_denied_packets", "accounted"), h.counter("otelcol_receiver_conntrack_denied_packets", "max_records")
		if len(rs) != 3 || accounted != 6 || shed != 14 || after-before != 20 {
			t.Fatalf("want 3 records of 2 packets and 14 packets shed of the 20 dropped; got %d accounted, %d shed, %d dropped:\n%s", accounted, shed, after-before, describe(rs))
		}
		for _, r := range rs {
			if r.Stats.PacketTotal != 2 || r.EgressPolicy.RuleAction != flowrecord.RuleActionDrop {
				t.Fatalf("want 2 packets and an egress drop:\n%s", describe(rs))
			}
		}
	})

	t.Run("max_rate", func(t *testing.T) {
		h := startReceiver(t, deniedConfig(l, DeniedConfig{NFLOGGroup: 34, IdleTimeout: time.Second, ActiveTimeout: time.Minute, MaxRate: 5}))
		before, _ := l.ruleCounters("iptables", "deny-udp", "DROP")
		src := addrPort(t, l.sendUDP(hostPort(srvV4, "9091"), 50, 10))
		match := func(r *flowrecord.Record) bool { return isDenied(r) && r.Source.Port == src.Port() }
		rs := h.waitFor("the rate-limited record", match, func(rs []flowrecord.Record) bool { return len(rs) > 0 })
		after, _ := l.ruleCounters("iptables", "deny-udp", "DROP")
		accounted, limited := h.counter("otelcol_receiver_conntrack_denied_packets", "accounted"), h.counter("otelcol_receiver_conntrack_denied_packets", "rate_limited")
		if len(rs) != 1 || after-before != 50 || accounted+limited != 50 || accounted < 5 || accounted > 10 || rs[0].Stats.PacketTotal != uint64(accounted) {
			t.Fatalf("want the 50 dropped packets split into ~5 accounted (the burst) and the rest rate_limited; got %d accounted, %d limited, %d dropped:\n%s", accounted, limited, after-before, describe(rs))
		}
	})
}

// TestDeniedGroupTaken: a group another socket holds fails Start, saying so.
func TestDeniedGroupTaken(t *testing.T) {
	l := newLab(t)
	startReceiver(t, deniedConfig(l, DeniedConfig{NFLOGGroup: 35, IdleTimeout: time.Second, ActiveTimeout: time.Minute}))
	rcv, err := NewFactory().CreateLogs(t.Context(), receivertest.NewNopSettings(metadata.Type), deniedConfig(l, DeniedConfig{NFLOGGroup: 35, IdleTimeout: time.Second, ActiveTimeout: time.Minute}), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	err = rcv.Start(t.Context(), componenttest.NewNopHost())
	if err == nil {
		_ = rcv.Shutdown(t.Context())
		t.Fatal("a second subscription to group 35 started")
	}
	if !errors.Is(err, syscall.EPERM) || !strings.Contains(err.Error(), "denied.nflog_group: cannot bind NFLOG group 35 in") ||
		!strings.Contains(err.Error(), "another process (ulogd, another collector) already listens on that group there") {
		t.Fatalf("want the group-taken error, got %v", err)
	}
}

// TestDeniedAfterDNAT: a connection to a ClusterIP that kube-proxy's DNAT
// sends to a port the policy denies. The record carries the translated
// destination the dropped packet had and, from the packet's conntrack entry,
// the ClusterIP as original destination (so k8s_flow can name the Service),
// where the kernel sends the entry (the decoding itself is tested in
// ctsource without one).
func TestDeniedAfterDNAT(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newLab(t)
			l.kubeProxy() // ClusterIP:80/tcp → server:8080
			ipt := iptablesFor(f)
			l.denyRule(ipt, "tcp", "8080", 36, "drop ingress", "DROP", "deny-svc")
			h := startReceiver(t, deniedConfig(l, DeniedConfig{NFLOGGroup: 36, IdleTimeout: time.Second, ActiveTimeout: time.Minute}))
			l.do(l.cli, func() error {
				c, err := net.DialTimeout("tcp", hostPort(f.clusterIP, "80"), 1500*time.Millisecond)
				if err == nil {
					c.Close()
					return errors.New("connected through a DROP rule")
				}
				return nil
			})
			match := func(r *flowrecord.Record) bool { return isDenied(r) && r.Destination.Port == 8080 }
			rs := h.waitFor("the denied connection to the ClusterIP", match, func(rs []flowrecord.Record) bool { return len(rs) > 0 })
			r := rs[0]
			// Without the kernel's conntrack glue (CONFIG_NETFILTER_NETLINK_GLUE_CT)
			// the packet's destination is all there is.
			origDst, origPort := f.clusterIP, uint16(80)
			if !h.rcv.(*conntrackReceiver).denied.withCT {
				t.Log("kernel without CONFIG_NETFILTER_NETLINK_GLUE_CT: no original destination to read")
				origDst, origPort = f.srv, 8080
			}
			if len(rs) != 1 || r.Destination.Address.String() != f.srv || r.OriginalDestinationAddress.String() != origDst ||
				r.OriginalDestinationPort != origPort || r.IngressPolicy.RuleAction != flowrecord.RuleActionDrop {
				t.Fatalf("want one ingress drop to %s:8080 with original destination %s:%d:\n%s", f.srv, origDst, origPort, describe(rs))
			}
		})
	}
}

// TestDeniedShutdownFlush: denied connections not idle yet at shutdown are
// exported by Shutdown.
func TestDeniedShutdownFlush(t *testing.T) {
	l := newLab(t)
	l.denyRule("iptables", "udp", "9091", 37, "drop egress", "DROP", "deny-udp")
	h := startReceiver(t, deniedConfig(l, DeniedConfig{NFLOGGroup: 37, IdleTimeout: time.Hour, ActiveTimeout: time.Hour}))
	src := addrPort(t, l.sendUDP(hostPort(srvV4, "9091"), 3, 10))
	deadline := time.Now().Add(10 * time.Second)
	for h.counter("otelcol_receiver_conntrack_denied_packets", "accounted") < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the 3 logged packets were not accounted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	match := func(r *flowrecord.Record) bool { return isDenied(r) && r.Source.Port == src.Port() }
	if rs := h.waitFor("nothing before shutdown", match, func([]flowrecord.Record) bool { return true }); len(rs) != 0 {
		t.Fatalf("a record before its idle timeout:\n%s", describe(rs))
	}
	h.stop()
	rs := h.waitFor("the flushed record", match, func(rs []flowrecord.Record) bool { return len(rs) > 0 })
	if len(rs) != 1 || rs[0].Stats.PacketTotal != 3 || rs[0].EgressPolicy.RuleAction != flowrecord.RuleActionDrop {
		t.Fatalf("want one egress drop of 3 packets at shutdown:\n%s", describe(rs))
	}
}

// TestDeniedBurst: a burst of denied datagrams (200 source ports × 200,
// sent as fast as the client can) through a real NFLOG rule, with neither
// max_rate nor max_records set. Every packet the kernel's rule dropped is accounted or,
// if the kernel could not hand it over, counted lost; the test logs the
// rate reached.
func TestDeniedBurst(t *testing.T) {
	l := newLab(t)
	l.denyRule("iptables", "udp", "9091", 38, "drop egress", "DROP", "deny-udp")
	h := startReceiver(t, deniedConfig(l, DeniedConfig{NFLOGGroup: 38, IdleTimeout: time.Second, ActiveTimeout: time.Minute}))
	const sockets, each = 200, 200
	began := time.Now()
	for range sockets {
		l.sendUDP(hostPort(srvV4, "9091"), each, 10)
	}
	sent := time.Since(began)
	dropped, _ := l.ruleCounters("iptables", "deny-udp", "DROP")
	deadline := time.Now().Add(20 * time.Second)
	var accounted, lost int64
	for {
		accounted, lost = h.counter("otelcol_receiver_conntrack_denied_packets", "accounted"), h.counter("otelcol_receiver_conntrack_denied_packets", "lost")
		if accounted+lost >= int64(dropped) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d packets dropped in %v (%.0f/s): %d accounted, %d lost, %d ENOBUFS",
		dropped, sent.Round(time.Millisecond), float64(dropped)/sent.Seconds(), accounted, lost,
		h.counter("otelcol_receiver_conntrack_netlink_errors", "enobufs"))
	if dropped != sockets*each || accounted+lost != int64(dropped) {
		t.Fatalf("%d dropped (want %d), %d accounted + %d lost: every dropped packet must be one or the other", dropped, sockets*each, accounted, lost)
	}
	// A source port the kernel hands out again is the same 5-tuple: records
	// number at most one per socket, and carry every packet accounted.
	match := func(r *flowrecord.Record) bool { return isDenied(r) && r.Destination.Port == 9091 }
	sum := func(rs []flowrecord.Record) (n uint64) {
		for _, r := range rs {
			n += r.Stats.PacketDelta
		}
		return n
	}
	rs := h.waitFor("records carrying every packet", match, func(rs []flowrecord.Record) bool { return sum(rs) >= uint64(accounted) })
	if sum(rs) != uint64(accounted) || len(rs) > sockets {
		t.Fatalf("%d records carry %d packets, %d accounted", len(rs), sum(rs), accounted)
	}
}

// TestDeniedRetriesAcrossIdleAreOneChain: with the shipped node
// configuration (poll 1s, active_timeout 2s, idle_timeout 1s, `denied: {}`)
// a connection attempt to a port the Node's ingress rule drops sends its SYN
// at 0 s and retransmits it at 1 s, 3 s and 7 s, and a client sends
// datagrams 2 s apart to a port it rejects: the idle timeout passes between
// their packets, so each goes out in several records, but as one chain, as
// the source Node's conntrack entry of each has one start: every record has
// the first packet's start, and the deltas add up to the totals, which are
// what the kernel's rule counted.
func TestDeniedRetriesAcrossIdleAreOneChain(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newLab(t)
			ipt := iptablesFor(f)
			l.denyRule(ipt, "tcp", "9090", 39, "drop ingress", "DROP", "deny-tcp")
			l.denyRule(ipt, "udp", "9091", 39, "reject ingress", "REJECT", "deny-udp")
			cfg := deniedConfig(l, defaultDeniedConfig())
			cfg.Denied.Get().NFLOGGroup = 39
			cfg.PollInterval, cfg.ActiveTimeout, cfg.IdleTimeout = time.Second, 2*time.Second, time.Second
			// Exponential SYN backoff from the first retry (kernels from 6.5
			// make the first four retries 1 s apart by default).
			_ = exec.Command("ip", "netns", "exec", l.cli, "sysctl", "-qw", "net.ipv4.tcp_syn_linear_timeouts=0").Run()
			h := startReceiver(t, cfg)

			var udpSrc netip.AddrPort
			done := make(chan error, 1)
			go func() { // the datagrams, while the SYNs are retransmitted
				n, err := ctsource.OpenNamespace(l.path(l.cli))
				if err != nil {
					done <- err
					return
				}
				defer n.Close()
				done <- n.Do(func() error {
					c, err := net.ListenPacket("udp", ":0") // unconnected: a REJECT's ICMP error fails no send
					if err != nil {
						return err
					}
					defer c.Close()
					to, err := net.ResolveUDPAddr("udp", hostPort(f.srv, "9091"))
					if err != nil {
						return err
					}
					if udpSrc, err = netip.ParseAddrPort(c.LocalAddr().String()); err != nil {
						return err
					}
					for i := range 3 {
						if i > 0 {
							time.Sleep(2 * time.Second)
						}
						if _, err := c.WriteTo(make([]byte, 100), to); err != nil {
							return err
						}
					}
					return nil
				})
			}()
			l.do(l.cli, func() error {
				d := net.Dialer{Timeout: 7500 * time.Millisecond} // the SYN and its retransmissions at 1 s, 3 s and 7 s
				c, err := d.Dial("tcp", hostPort(f.srv, "9090"))
				if err == nil {
					c.Close()
					return errors.New("connected through a DROP rule")
				}
				return nil
			})
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			tcpPkts, tcpBytes := l.ruleCounters(ipt, "deny-tcp", "DROP")
			udpPkts, udpBytes := l.ruleCounters(ipt, "deny-udp", "REJECT")
			t.Logf("the rules counted %d SYNs, %d datagrams", tcpPkts, udpPkts)
			if tcpPkts < 3 || udpPkts != 3 {
				t.Fatalf("the rules counted %d SYNs and %d datagrams: the test's traffic did not go as planned", tcpPkts, udpPkts)
			}
			for _, c := range []struct {
				name           string
				match          func(r *flowrecord.Record) bool
				packets, bytes uint64
			}{
				{"tcp", func(r *flowrecord.Record) bool { return isDenied(r) && r.Protocol == 6 && r.Destination.Port == 9090 }, tcpPkts, tcpBytes},
				{"udp", func(r *flowrecord.Record) bool {
					return isDenied(r) && r.Protocol == 17 && r.Destination.Port == 9091 && r.Source.Port == udpSrc.Port()
				}, udpPkts, udpBytes},
			} {
				sum := func(rs []flowrecord.Record) (n uint64) {
					for _, r := range rs {
						n += r.Stats.PacketDelta
					}
					return n
				}
				h.waitFor(c.name+" records carrying every packet", c.match, func(rs []flowrecord.Record) bool { return sum(rs) >= c.packets })
			}
			time.Sleep(2 * time.Second) // nothing may follow
			for _, c := range []struct {
				name           string
				match          func(r *flowrecord.Record) bool
				packets, bytes uint64
			}{
				{"tcp", func(r *flowrecord.Record) bool { return isDenied(r) && r.Protocol == 6 && r.Destination.Port == 9090 }, tcpPkts, tcpBytes},
				{"udp", func(r *flowrecord.Record) bool {
					return isDenied(r) && r.Protocol == 17 && r.Destination.Port == 9091 && r.Source.Port == udpSrc.Port()
				}, udpPkts, udpBytes},
			} {
				rs := h.waitFor(c.name, c.match, func([]flowrecord.Record) bool { return true })
				if len(rs) < 2 {
					t.Fatalf("%s: want the packets in several records (the idle timeout passed between them):\n%s", c.name, describe(rs))
				}
				var packets, bytes uint64
				for i, r := range rs {
					packets += r.Stats.PacketDelta
					bytes += r.Stats.OctetDelta
					if !r.Start.Equal(rs[0].Start) || r.Stats.PacketTotal != packets || r.Stats.OctetTotal != bytes {
						t.Fatalf("%s: record %d is not the continuation of one chain (one start, deltas adding up to the totals):\n%s", c.name, i, describe(rs))
					}
				}
				if packets != c.packets || bytes != c.bytes {
					t.Fatalf("%s: the chain carries %d packets / %d bytes, the rule counted %d / %d:\n%s", c.name, packets, bytes, c.packets, c.bytes, describe(rs))
				}
			}
		})
	}
}
