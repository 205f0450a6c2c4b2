//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// A long-lived transfer: longTransferBytes sent over longTransferTime, so the
// node collectors (2 s active timeout) and the gateway (3 s) export it many
// times while it runs.
const (
	longTransferBytes = 300_000
	longTransferTime  = 12 * time.Second
)

// exportedFlow is one exported record of a long transfer, as a sink holds it:
// the counters (common, and per Node where the sink has them) and the
// pre-DNAT destination.
type exportedFlow struct {
	end                 uint32
	state               string // "" where the sink has no correlation state (IPFIX)
	common, commonRev   flowrecord.Counters
	perSide             bool // the sink carries per-Node statistics
	src, srcRev         flowrecord.Counters
	dst, dstRev         flowrecord.Counters
	originalDestination netip.AddrPort
}

// TestDeltasAddUpOverActiveTimeouts (decision D10): a Pod streams to a remote
// Pod through a ClusterIP for several active timeouts of both the Nodes and
// the gateway. At ClickHouse, IPFIX and OTLP, the deltas of every record
// exported for the connection add up to its final totals (common, and per
// Node where the sink carries them), the totals hold the bytes sent, every
// record is paired, and every record names the ClusterIP the client dialled
// as the pre-DNAT destination (IPFIX: Antrea's layout has no such element;
// its destinationClusterIP and destinationServicePort are checked instead).
func TestDeltasAddUpOverActiveTimeouts(t *testing.T) {
	b := startBed(t, options{gateways: 1, ipfix: true, otlp: true})
	transfers := []Case{
		{Name: "long inter-Node transfer to a ClusterIP", From: "pod:client-a", To: "service:web-remote", Proto: "tcp", Sport: 41401},
		{Name: "long inter-Node transfer to a ClusterIP (IPv6)", From: "pod:client-a", To: "service:web-remote", Proto: "tcp", Sport: 41501, IPv6: true},
	}
	longTransfers(t, b, transfers, "-bytes")

	for _, c := range transfers {
		service := b.services["web-remote"]
		clusterIP := service.ClusterIPv4
		if c.IPv6 {
			clusterIP = service.ClusterIPv6
		}
		b.checkDeltas(t, c, transfer{request: longTransferBytes, reply: replyBytes,
			originalDestination: netip.AddrPortFrom(clusterIP, service.Port)})
	}
}

// TestDeltasAddUpOnLongDownload (decision D10), run as the shipped
// configurations run (two gateway replicas; file_storage on the Nodes, for
// the receiver's export state and the persistent sending queue; the
// gateway's Kubernetes index; denied connections on; the node timers of a
// cluster a user tunes for fast feedback: 1 s polls, 2 s active timeout,
// the default 15 s idle timeout): a Pod downloads longTransferBytes from a
// Pod on another Node, directly and through a ClusterIP, the server writing
// slowly over longTransferTime, in both address families at once. The bulk
// of the bytes is in the reply direction, so the reverse deltas are what
// must add up: summed over every record at every sink they equal the final
// totals, for both directions, in common and per Node.
//
// With the persistent queue under load_balancing's protocol.otlp (one queue
// per gateway replica, all in one storage under one name) the replicas'
// queues read each other's batches: records went to the wrong replica or
// never left, and a connection's rows summed to twice its totals, or none
// arrived.
func TestDeltasAddUpOnLongDownload(t *testing.T) {
	b := startBed(t, options{gateways: 2, ipfix: true, otlp: true, asShipped: true, poll: time.Second, active: 2 * time.Second, idle: 15 * time.Second})
	downloads := []Case{
		{Name: "long inter-Node download", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: 41601},
		{Name: "long inter-Node download (IPv6)", From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: 41701, IPv6: true},
		{Name: "long inter-Node download via ClusterIP", From: "pod:client-a", To: "service:web-remote", Proto: "tcp", Sport: 41602},
		{Name: "long inter-Node download via ClusterIP (IPv6)", From: "pod:client-a", To: "service:web-remote", Proto: "tcp", Sport: 41702, IPv6: true},
	}
	longTransfers(t, b, downloads, "-pull")
	for _, c := range downloads {
		b.checkDeltas(t, c, transfer{reply: longTransferBytes})
	}
	// Where the four connections' keys fall on the ring depends on the
	// replicas' ports: one replica may get them all. The fault did not
	// depend on it (each node collector has an exporter per replica
	// whatever the keys), so this is only logged.
	for _, g := range b.gateways {
		t.Logf("%s accepted %.0f records", g.Name, acceptedRecords(t, g))
	}
}

// checkDeltas waits until every sink holds the complete record chain of the
// long transfer c, and fails the test with what is wrong with it (deltasAddUp).
func (b *bed) checkDeltas(t *testing.T, c Case, want transfer) {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	sinks := []struct {
		name    string
		records func(c Case) ([]exportedFlow, error)
	}{
		{"ClickHouse", func(c Case) ([]exportedFlow, error) { return clickHouseFlows(conn, c) }},
		{"IPFIX", func(c Case) ([]exportedFlow, error) { return b.ipfixFlows(c), nil }},
		{"OTLP", b.otlpFlows},
	}
	for _, s := range sinks {
		var bad []string
		deadline := time.Now().Add(90 * time.Second)
		prev := -1
		for time.Now().Before(deadline) {
			recs, err := s.records(c)
			if err != nil {
				bad = []string{err.Error()}
			} else {
				bad = deltasAddUp(recs, want)
			}
			if len(bad) == 0 && len(recs) == prev { // complete, and nothing arrived since the last look
				break
			}
			prev = len(recs)
			time.Sleep(3 * time.Second)
		}
		if len(bad) > 0 {
			t.Errorf("%s at %s: %s", c.Name, s.name, strings.Join(bad, "; "))
		} else {
			t.Logf("%s at %s: %d records, deltas add up", c.Name, s.name, prev)
		}
	}
}

// longTransfers runs every case at once as a long transfer of
// longTransferBytes over longTransferTime: sent by the client (flag -bytes)
// or pulled from the server (-pull).
func longTransfers(t *testing.T, b *bed, cases []Case, flag string) {
	t.Helper()
	for i, r := range b.sendAll(cases, func(Case) []string {
		return []string{flag, fmt.Sprint(longTransferBytes), "-over", longTransferTime.String(), "-timeout", "20s"}
	}) {
		require.NoError(t, r.err, "%s: %s", cases[i].Name, r.out)
	}
}

// transfer is what a long transfer's records must hold: at least request
// and reply payload bytes in the totals, and the pre-DNAT destination
// (not checked when not valid).
type transfer struct {
	request, reply      uint64
	originalDestination netip.AddrPort
}

// deltasAddUp lists what is wrong with the records of one long transfer.
func deltasAddUp(recs []exportedFlow, want transfer) []string {
	if len(recs) < 3 {
		return []string{fmt.Sprintf("%d records, want one per active timeout over %s", len(recs), longTransferTime)}
	}
	var bad []string
	last := recs[0]
	var sum exportedFlow
	wrongDst := map[netip.AddrPort]int{}
	add := func(s, c *flowrecord.Counters) {
		s.PacketDelta += c.PacketDelta
		s.OctetDelta += c.OctetDelta
	}
	for _, r := range recs {
		if r.end > last.end || (r.end == last.end && r.common.OctetTotal >= last.common.OctetTotal) {
			last = r
		}
		add(&sum.common, &r.common)
		add(&sum.commonRev, &r.commonRev)
		add(&sum.src, &r.src)
		add(&sum.srcRev, &r.srcRev)
		add(&sum.dst, &r.dst)
		add(&sum.dstRev, &r.dstRev)
		if r.state != "" && r.state != "paired" {
			bad = append(bad, fmt.Sprintf("a %q record", r.state))
		}
		if want.originalDestination.IsValid() && r.originalDestination != want.originalDestination {
			wrongDst[r.originalDestination]++
		}
	}
	for got, n := range wrongDst {
		bad = append(bad, fmt.Sprintf("%d records name %s as original destination, want %s", n, got, want.originalDestination))
	}
	if last.common.OctetTotal < want.request {
		bad = append(bad, fmt.Sprintf("final octet total %d, less than the %d bytes sent", last.common.OctetTotal, want.request))
	}
	if last.commonRev.OctetTotal < want.reply {
		bad = append(bad, fmt.Sprintf("final reverse octet total %d, less than the %d bytes replied", last.commonRev.OctetTotal, want.reply))
	}
	check := func(name string, sum, final flowrecord.Counters) {
		if sum.OctetDelta != final.OctetTotal || sum.PacketDelta != final.PacketTotal {
			bad = append(bad, fmt.Sprintf("%s deltas sum to %d B / %d packets, final totals %d B / %d packets",
				name, sum.OctetDelta, sum.PacketDelta, final.OctetTotal, final.PacketTotal))
		}
	}
	check("common", sum.common, last.common)
	check("common reverse", sum.commonRev, last.commonRev)
	if last.perSide {
		check("source Node", sum.src, last.src)
		check("source Node reverse", sum.srcRev, last.srcRev)
		check("destination Node", sum.dst, last.dst)
		check("destination Node reverse", sum.dstRev, last.dstRev)
	}
	return bad
}

func clickHouseFlows(conn clickhouse.Conn, c Case) ([]exportedFlow, error) {
	rows, err := conn.Query(context.Background(), `SELECT flowEndSeconds, correlationState,
		packetTotalCount, octetTotalCount, packetDeltaCount, octetDeltaCount,
		reversePacketTotalCount, reverseOctetTotalCount, reversePacketDeltaCount, reverseOctetDeltaCount,
		originalDestinationIP, originalDestinationPort
		FROM flowtel_e2e.flows WHERE sourceTransportPort = ? AND protocolIdentifier = 6`, c.Sport)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []exportedFlow
	for rows.Next() {
		var f exportedFlow
		var end time.Time
		var ip string
		var port uint16
		if err := rows.Scan(&end, &f.state,
			&f.common.PacketTotal, &f.common.OctetTotal, &f.common.PacketDelta, &f.common.OctetDelta,
			&f.commonRev.PacketTotal, &f.commonRev.OctetTotal, &f.commonRev.PacketDelta, &f.commonRev.OctetDelta,
			&ip, &port); err != nil {
			return nil, err
		}
		f.end = uint32(end.Unix())
		addr, _ := netip.ParseAddr(ip)
		f.originalDestination = netip.AddrPortFrom(addr, port)
		out = append(out, f)
	}
	return out, rows.Err()
}

// ipfixFlows reads the records of c the go-ipfix collector holds (the bed is
// fresh and small: far fewer than the 4096 it keeps).
func (b *bed) ipfixFlows(c Case) []exportedFlow {
	recs, err := b.ipfix.col.Records()
	if err != nil {
		return nil
	}
	var out []exportedFlow
	for _, r := range recs {
		f := r.Fields
		u := func(name string) uint64 { v, _ := strconv.ParseUint(f[name], 10, 64); return v }
		if u("sourceTransportPort") != uint64(c.Sport) || u("protocolIdentifier") != 6 {
			continue
		}
		counters := func(suffix, reverse string) flowrecord.Counters {
			name := func(base string) string {
				if reverse != "" {
					base = reverse + strings.ToUpper(base[:1]) + base[1:]
				}
				return base + suffix
			}
			return flowrecord.Counters{PacketTotal: u(name("packetTotalCount")), OctetTotal: u(name("octetTotalCount")),
				PacketDelta: u(name("packetDeltaCount")), OctetDelta: u(name("octetDeltaCount"))}
		}
		clusterIP := f["destinationClusterIPv4"]
		if c.IPv6 {
			clusterIP = f["destinationClusterIPv6"]
		}
		addr, _ := netip.ParseAddr(clusterIP)
		out = append(out, exportedFlow{
			end: uint32(u("flowEndSeconds")), common: counters("", ""), commonRev: counters("", "reverse"), perSide: true,
			src: counters("FromSourceNode", ""), srcRev: counters("FromSourceNode", "reverse"),
			dst: counters("FromDestinationNode", ""), dstRev: counters("FromDestinationNode", "reverse"),
			originalDestination: netip.AddrPortFrom(addr, uint16(u("destinationServicePort"))),
		})
	}
	return out
}

// otlpFlows decodes the records of c the OTLP sink received.
func (b *bed) otlpFlows(c Case) ([]exportedFlow, error) {
	recs, err := b.otlp.flowRecords()
	if err != nil {
		return nil, err
	}
	var out []exportedFlow
	for _, r := range recs {
		if r.Source.Port != c.Sport || r.Protocol != 6 {
			continue
		}
		f := exportedFlow{end: uint32(r.End.Unix()), state: r.Correlation.String(), common: r.Stats, commonRev: r.ReverseStats,
			originalDestination: netip.AddrPortFrom(r.OriginalDestinationAddress, r.OriginalDestinationPort)}
		if a := r.Aggregation; a != nil {
			f.perSide = true
			f.src, f.srcRev = a.StatsFromSource, a.ReverseStatsFromSource
			f.dst, f.dstRev = a.StatsFromDestination, a.ReverseStatsFromDestination
		}
		out = append(out, f)
	}
	return out, nil
}
