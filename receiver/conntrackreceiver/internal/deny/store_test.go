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
	require.Zero(t, s.Len(), "idle connections are forgotten")
	// A packet after the idle export starts a new connection.
	s.Add(syn, nil, nil, t0.Add(20*time.Second))
	xs = s.Flush(t0.Add(21*time.Second), nil)
	require.Len(t, xs, 1)
	require.Equal(t, []uint64{1, 60}, []uint64{xs[0].Packets, xs[0].Bytes})
	require.Equal(t, t0.Add(20*time.Second), xs[0].Start)
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
