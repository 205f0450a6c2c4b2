package deny

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// ipv4 builds an IPv4 packet of total length n (only its first bytes, as
// NFLOG's copy range would) with the given transport header.
func ipv4(src, dst string, proto uint8, n int, l4 ...byte) []byte {
	b := make([]byte, 20, 20+len(l4))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	b[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	return append(b, l4...)
}

// ipv6 builds an IPv6 packet with payload length plen, after the extension
// headers ext (each given as next-header, bytes).
func ipv6(src, dst string, next uint8, plen int, rest ...byte) []byte {
	b := make([]byte, 40, 40+len(rest))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(plen))
	b[6] = next
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, rest...)
}

func ports(src, dst uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, src), dst)
}

func TestParse(t *testing.T) {
	a4, b4 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a6, b6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	frag := ipv4("10.0.0.1", "10.0.0.2", 17, 500)
	binary.BigEndian.PutUint16(frag[6:], 185) // fragment offset 185×8
	for _, tt := range []struct {
		name   string
		pkt    []byte
		key    Key
		length uint64
		ok     bool
	}{
		{"tcp v4", ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40000, 8080)...), Key{Src: a4, Dst: b4, SrcPort: 40000, DstPort: 8080, Proto: 6}, 60, true},
		{"udp v4", ipv4("10.0.0.1", "10.0.0.2", 17, 1028, ports(5000, 53)...), Key{Src: a4, Dst: b4, SrcPort: 5000, DstPort: 53, Proto: 17}, 1028, true},
		{"icmp echo v4", ipv4("10.0.0.1", "10.0.0.2", 1, 84, 8, 0, 0, 0, 0x12, 0x34), Key{Src: a4, Dst: b4, Proto: 1, ICMPType: 8, ICMPID: 0x1234}, 84, true},
		{"icmp unreachable v4: no id", ipv4("10.0.0.1", "10.0.0.2", 1, 56, 3, 1, 0, 0, 0x12, 0x34), Key{Src: a4, Dst: b4, Proto: 1, ICMPType: 3, ICMPCode: 1}, 56, true},
		{"later fragment v4: no ports", frag, Key{Src: a4, Dst: b4, Proto: 17}, 500, true},
		{"tcp v6", ipv6("fd00::1", "fd00::2", 6, 40, ports(40000, 8080)...), Key{Src: a6, Dst: b6, SrcPort: 40000, DstPort: 8080, Proto: 6}, 80, true},
		{"tcp v6 after hop-by-hop", ipv6("fd00::1", "fd00::2", 0, 48, append([]byte{6, 0, 0, 0, 0, 0, 0, 0}, ports(1, 2)...)...), Key{Src: a6, Dst: b6, SrcPort: 1, DstPort: 2, Proto: 6}, 88, true},
		{"icmpv6 echo", ipv6("fd00::1", "fd00::2", 58, 64, 128, 0, 0, 0, 0, 7), Key{Src: a6, Dst: b6, Proto: 58, ICMPType: 128, ICMPID: 7}, 104, true},
		{"sctp v4", ipv4("10.0.0.1", "10.0.0.2", 132, 100, ports(9, 10)...), Key{Src: a4, Dst: b4, SrcPort: 9, DstPort: 10, Proto: 132}, 100, true},
		{"truncated v4", ipv4("10.0.0.1", "10.0.0.2", 6, 60)[:19], Key{}, 0, false},
		{"not ip", []byte{0x20, 1, 2}, Key{}, 0, false},
		{"empty", nil, Key{}, 0, false},
	} {
		k, n, ok := parse(tt.pkt)
		require.Equal(t, tt.ok, ok, tt.name)
		if ok {
			require.Equal(t, tt.key, k, tt.name)
			require.Equal(t, tt.length, n, tt.name)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	drop, reject := flowrecord.RuleActionDrop, flowrecord.RuleActionReject
	for _, tt := range []struct {
		prefix string
		want   Verdict
	}{
		{"", Verdict{Action: drop}},
		{"flowtel drop ingress", Verdict{Action: drop}},
		{"REJECT egress", Verdict{Action: reject, Egress: true}},
		{"kube-router:egress", Verdict{Action: drop, Egress: true}},
		{"np=default/deny|reject|ingress", Verdict{Action: reject}},
		{"rejected egressive", Verdict{Action: drop}}, // whole words only
	} {
		require.Equal(t, tt.want, ParsePrefix([]byte(tt.prefix)), "prefix %q", tt.prefix)
	}
}

func TestStoreOneRecordPerTupleAfterIdle(t *testing.T) {
	s := New(Config{IdleTimeout: 5 * time.Second, ActiveTimeout: time.Minute})
	t0 := time.Unix(1000, 0)
	syn := ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40000, 8080)...)
	other := ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40001, 8080)...)
	for i, at := range []time.Duration{0, time.Second, 3 * time.Second} { // SYN retransmissions
		require.Equal(t, Accounted, s.Add(syn, []byte("drop ingress"), nil, t0.Add(at)), "packet %d", i)
	}
	require.Equal(t, Accounted, s.Add(other, []byte("reject egress"), nil, t0.Add(time.Second)))
	require.Empty(t, s.Expired(t0.Add(5*time.Second), nil), "not idle yet")
	xs := s.Expired(t0.Add(6*time.Second), nil)
	require.Len(t, xs, 1, "the second tuple went idle first")
	require.Equal(t, uint16(40001), xs[0].SrcPort)
	require.Equal(t, Verdict{Action: flowrecord.RuleActionReject, Egress: true}, xs[0].Verdict)
	xs = s.Expired(t0.Add(8*time.Second), nil)
	require.Len(t, xs, 1)
	x := xs[0]
	require.Equal(t, Verdict{Action: flowrecord.RuleActionDrop}, x.Verdict)
	require.Equal(t, []uint64{3, 180, 3, 180}, []uint64{x.Packets, x.Bytes, x.PacketDelta, x.OctetDelta})
	require.Equal(t, t0, x.Start)
	require.Equal(t, t0.Add(3*time.Second), x.Last)
	require.Equal(t, 2, s.Len(), "idle connections linger")
	require.Equal(t, 2, s.Lingering())
	// A packet after the idle export, within the linger, goes on with the
	// same connection: its start, its totals, the new packet as delta.
	s.Add(syn, nil, nil, t0.Add(20*time.Second))
	require.Equal(t, 1, s.Lingering())
	xs = s.Flush(t0.Add(21*time.Second), nil)
	require.Len(t, xs, 1)
	require.Equal(t, []uint64{4, 240, 1, 60}, []uint64{xs[0].Packets, xs[0].Bytes, xs[0].PacketDelta, xs[0].OctetDelta})
	require.Equal(t, t0, xs[0].Start)
	require.Zero(t, s.Len())
	require.Zero(t, s.Lingering())
}

// TestStoreLingerNotLongerThanIdleForgets: a linger not longer than the idle
// timeout forgets a connection at its idle export; a packet then starts a
// new connection.
func TestStoreLingerNotLongerThanIdleForgets(t *testing.T) {
	s := New(Config{IdleTimeout: 5 * time.Second, ActiveTimeout: time.Minute, Linger: Linger{TCP: 5 * time.Second, UDP: time.Hour}})
	t0 := time.Unix(1000, 0)
	syn := ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40000, 8080)...)
	s.Add(syn, nil, nil, t0)
	require.Len(t, s.Expired(t0.Add(5*time.Second), nil), 1)
	require.Zero(t, s.Len())
	s.Add(syn, nil, nil, t0.Add(6*time.Second))
	xs := s.Flush(t0.Add(7*time.Second), nil)
	require.Len(t, xs, 1)
	require.Equal(t, t0.Add(6*time.Second), xs[0].Start)
	require.Equal(t, []uint64{1, 60}, []uint64{xs[0].Packets, xs[0].Bytes})
}

func TestStoreConntrack(t *testing.T) {
	s := New(Config{IdleTimeout: time.Second, ActiveTimeout: time.Minute})
	t0 := time.Unix(1000, 0)
	ct := &Conntrack{OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 80, Zone: 3, Mark: 0x20, Labels: [16]byte{15: 1}}
	s.Add(ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40000, 8080)...), nil, ct, t0)
	s.Add(ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40000, 8080)...), nil, nil, t0) // a later packet changes nothing
	s.Add(ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(40001, 8080)...), nil, nil, t0)
	xs := s.Flush(t0, nil)
	require.Len(t, xs, 2)
	for _, x := range xs {
		want := *ct
		if x.SrcPort == 40001 {
			want = Conntrack{OrigDst: netip.MustParseAddr("10.0.0.2"), OrigDstPort: 8080}
		}
		require.Equal(t, want, x.Conntrack, "source port %d", x.SrcPort)
	}
}

func TestStoreActiveTimeoutDeltas(t *testing.T) {
	s := New(Config{IdleTimeout: 5 * time.Second, ActiveTimeout: 10 * time.Second})
	t0 := time.Unix(1000, 0)
	p := ipv4("10.0.0.1", "10.0.0.2", 17, 100, ports(5000, 53)...)
	var got []Export
	for i := 0; i <= 25; i++ { // a packet a second for 25 s: never idle
		at := t0.Add(time.Duration(i) * time.Second)
		s.Add(p, nil, nil, at)
		got = s.Expired(at, got)
	}
	got = s.Expired(t0.Add(31*time.Second), got) // idle
	var deltas, last uint64
	for _, x := range got {
		deltas += x.PacketDelta
		last = x.Packets
	}
	require.Len(t, got, 3, "two active exports (10 s, 20 s) and the idle one")
	require.Equal(t, uint64(26), deltas, "deltas add up to the total")
	require.Equal(t, uint64(26), last)
	require.Empty(t, s.Expired(t0.Add(40*time.Second), nil))
}

func TestStoreBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pkt := func(port uint16) []byte { return ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(port, 80)...) }

	s := New(Config{IdleTimeout: time.Second, ActiveTimeout: time.Minute, MaxRecords: 2})
	require.Equal(t, Accounted, s.Add(pkt(1), nil, nil, t0))
	require.Equal(t, Accounted, s.Add(pkt(2), nil, nil, t0))
	require.Equal(t, MaxRecords, s.Add(pkt(3), nil, nil, t0), "a third tuple")
	require.Equal(t, Accounted, s.Add(pkt(1), nil, nil, t0), "a held tuple still accumulates")
	require.Equal(t, Undecodable, s.Add([]byte{0x10}, nil, nil, t0))

	r := New(Config{IdleTimeout: time.Second, ActiveTimeout: time.Minute, MaxRate: 10})
	var limited int
	for i := range 30 { // 30 packets within 0.29 s: the burst of 10 and ~2.9 refilled
		if r.Add(pkt(uint16(i)), nil, nil, t0.Add(time.Duration(i)*10*time.Millisecond)) == RateLimited {
			limited++
		}
	}
	require.InDelta(t, 18, limited, 1)
	require.Equal(t, Accounted, r.Add(pkt(1), nil, nil, t0.Add(2*time.Second)), "refilled")
}

// chain checks that xs are one record chain: one start, totals that only
// grow, and deltas that add up to the last totals; it returns the last.
func chain(t *testing.T, xs []Export) Export {
	t.Helper()
	require.NotEmpty(t, xs)
	var packets, bytes uint64
	for i, x := range xs {
		require.Equal(t, xs[0].Start, x.Start, "record %d starts a second chain", i)
		packets += x.PacketDelta
		bytes += x.OctetDelta
		require.Equal(t, []uint64{packets, bytes}, []uint64{x.Packets, x.Bytes}, "record %d: deltas add up to the totals", i)
	}
	return xs[len(xs)-1]
}

// TestStoreSYNRetriesAcrossIdleAreOneChain: with a 1 s idle timeout (the
// shipped node configuration) a denied SYN and its retransmissions (Linux:
// 1 s, 2 s, 4 s, 8 s apart) are exported as the idle timeout passes between
// them, but as one connection: each record has the first SYN's start, totals
// that grow and the deltas of the retries since the previous record, as the
// source Node's conntrack entry (SYN_SENT, 120 s) has one start for all of
// them. Only a packet after the linger starts a new connection.
func TestStoreSYNRetriesAcrossIdleAreOneChain(t *testing.T) {
	s := New(Config{IdleTimeout: time.Second, ActiveTimeout: 2 * time.Second})
	t0 := time.Unix(1000, 0)
	syn := ipv6("fd00::1", "fd00::2", 6, 40, ports(40000, 9090)...)
	var xs []Export
	tick := t0.Add(500 * time.Millisecond)
	for _, at := range []time.Duration{0, 1, 3, 7, 15} {
		at := t0.Add(at * time.Second)
		for ; tick.Before(at); tick = tick.Add(time.Second) {
			xs = s.Expired(tick, xs)
		}
		require.Equal(t, Accounted, s.Add(syn, []byte("drop ingress"), nil, at))
	}
	for end := tick.Add(10 * time.Second); tick.Before(end); tick = tick.Add(time.Second) {
		xs = s.Expired(tick, xs)
	}
	require.Greater(t, len(xs), 1, "the idle timeout passed between the retries")
	last := chain(t, xs)
	require.Equal(t, t0, last.Start)
	require.Equal(t, t0.Add(15*time.Second), last.Last)
	require.Equal(t, []uint64{5, 400}, []uint64{last.Packets, last.Bytes})
	require.Equal(t, 1, s.Len(), "the identity lingers after its last record")

	// Past the linger (TCP: conntrack's SYN_SENT timeout, 120 s, from the
	// last packet) the 5-tuple is forgotten: a packet then is a new
	// connection.
	require.Empty(t, s.Expired(t0.Add(15*time.Second+DefaultLinger.TCP-time.Millisecond), nil))
	require.Equal(t, 1, s.Len())
	require.Empty(t, s.Expired(t0.Add(15*time.Second+DefaultLinger.TCP), nil))
	require.Zero(t, s.Len())
	later := t0.Add(200 * time.Second)
	s.Add(syn, nil, nil, later)
	xs = s.Flush(later, nil)
	require.Len(t, xs, 1)
	require.Equal(t, later, xs[0].Start)
	require.Equal(t, []uint64{1, 80, 1, 80}, []uint64{xs[0].Packets, xs[0].Bytes, xs[0].PacketDelta, xs[0].OctetDelta})
}

// TestStoreGapsWithinTheLingerAreOneChain: the siblings of SYN retries. A
// ping (an echo request a second, one identifier) and datagrams a few
// seconds apart (a DNS client's retries) are each one connection on the
// source Node's conntrack (ICMP and UDP: 30 s without a packet): with a 1 s
// idle timeout they are exported between their packets, as one chain. A
// datagram more than the UDP linger after the previous one is a new
// connection.
func TestStoreGapsWithinTheLingerAreOneChain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name string
		pkt  []byte
		at   []time.Duration // seconds
		size uint64
	}{
		{"icmp echo, one a second", ipv4("10.0.0.1", "10.0.0.2", 1, 84, 8, 0, 0, 0, 0x12, 0x34), []time.Duration{0, 1, 2, 3, 4, 5}, 84},
		{"icmpv6 echo, one a second", ipv6("fd00::1", "fd00::2", 58, 64, 128, 0, 0, 0, 0, 7), []time.Duration{0, 1, 2, 3, 4, 5}, 104},
		{"udp retries", ipv4("10.0.0.1", "10.0.0.2", 17, 60, ports(5353, 53)...), []time.Duration{0, 5, 10, 25}, 60},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Config{IdleTimeout: time.Second, ActiveTimeout: 2 * time.Second})
			var xs []Export
			tick := t0.Add(500 * time.Millisecond)
			for _, at := range tt.at {
				at := t0.Add(at * time.Second)
				for ; tick.Before(at); tick = tick.Add(time.Second) {
					xs = s.Expired(tick, xs)
				}
				require.Equal(t, Accounted, s.Add(tt.pkt, nil, nil, at))
			}
			for end := tick.Add(5 * time.Second); tick.Before(end); tick = tick.Add(time.Second) {
				xs = s.Expired(tick, xs)
			}
			require.Greater(t, len(xs), 1, "the idle timeout passed between the packets")
			last := chain(t, xs)
			require.Equal(t, t0, last.Start)
			n := uint64(len(tt.at))
			require.Equal(t, []uint64{n, n * tt.size}, []uint64{last.Packets, last.Bytes})
		})
	}

	s := New(Config{IdleTimeout: time.Second, ActiveTimeout: 2 * time.Second})
	dgram := ipv4("10.0.0.1", "10.0.0.2", 17, 60, ports(5353, 53)...)
	s.Add(dgram, nil, nil, t0)
	require.Len(t, s.Expired(t0.Add(2*time.Second), nil), 1)
	require.Empty(t, s.Expired(t0.Add(DefaultLinger.UDP), nil))
	require.Zero(t, s.Len(), "forgotten at the end of the UDP linger")
	s.Add(dgram, nil, nil, t0.Add(DefaultLinger.UDP+time.Second))
	xs := s.Flush(t0.Add(DefaultLinger.UDP+time.Second), nil)
	require.Len(t, xs, 1)
	require.Equal(t, t0.Add(DefaultLinger.UDP+time.Second), xs[0].Start, "a new connection")
}

// TestStoreBoundsWithLingering: lingering connections count against
// max_records; a new 5-tuple at the bound takes the place of the one that
// began lingering first (counted in Evicted), and is shed only when none
// lingers. A lingering connection that goes on leaves the list.
func TestStoreBoundsWithLingering(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pkt := func(port uint16) []byte { return ipv4("10.0.0.1", "10.0.0.2", 6, 60, ports(port, 80)...) }
	s := New(Config{IdleTimeout: time.Second, ActiveTimeout: time.Minute, MaxRecords: 3})
	require.Equal(t, Accounted, s.Add(pkt(1), nil, nil, t0))
	require.Equal(t, Accounted, s.Add(pkt(2), nil, nil, t0.Add(time.Second)))
	require.Equal(t, Accounted, s.Add(pkt(3), nil, nil, t0.Add(2*time.Second)))
	require.Len(t, s.Expired(t0.Add(1500*time.Millisecond), nil), 1) // 1 lingers
	require.Len(t, s.Expired(t0.Add(2500*time.Millisecond), nil), 1) // 2 lingers
	require.Equal(t, []int{3, 2}, []int{s.Len(), s.Lingering()})

	require.Equal(t, Accounted, s.Add(pkt(2), nil, nil, t0.Add(3*time.Second)), "2 goes on")
	require.Equal(t, 1, s.Lingering())
	require.Equal(t, Accounted, s.Add(pkt(4), nil, nil, t0.Add(3*time.Second)), "4 takes 1's place")
	require.Equal(t, uint64(1), s.Evicted())
	require.Equal(t, []int{3, 0}, []int{s.Len(), s.Lingering()})
	require.Equal(t, MaxRecords, s.Add(pkt(5), nil, nil, t0.Add(3*time.Second)), "none lingers: shed")
	require.Equal(t, MaxRecords, s.Add(pkt(1), nil, nil, t0.Add(3*time.Second)), "1 was forgotten: a new 5-tuple, shed")

	xs := s.Flush(t0.Add(4*time.Second), nil)
	require.Len(t, xs, 3)
	for _, x := range xs {
		if x.SrcPort == 2 {
			require.Equal(t, []uint64{2, 1}, []uint64{x.Packets, x.PacketDelta}, "one chain across the linger")
			require.Equal(t, t0.Add(time.Second), x.Start)
		}
	}
}
