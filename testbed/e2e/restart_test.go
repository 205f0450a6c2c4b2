//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// The restart test's long transfer: restartBytes sent over restartSpread, the
// node collector stopped (SIGTERM) restartAfter into it and started again
// restartDown later, on the same file_storage directory.
const (
	restartSport  = 41030
	restartBytes  = 400_000
	restartSpread = 16 * time.Second
	restartAfter  = 6 * time.Second
	restartDown   = 3 * time.Second
)

// TestNodeCollectorRestart stops and restarts node-1's collector binary in the
// middle of a long Pod → Pod transfer on node-1: the deltas node-1 exported
// for the connection, over both runs, add up to its totals (the bytes sent and
// their headers), exactly once, and so do the deltas in ClickHouse. The first
// run flushes what it holds when it stops; the second resumes from the
// conntrack receiver's state in file_storage.
func TestNodeCollectorRestart(t *testing.T) {
	tap := new(consumertest.LogsSink)
	b := startBed(t, options{gateways: 1, nodeStorage: true, nodeTap: startOTLPReceiver(t, tap)})
	c := Case{Name: "long transfer", From: "pod:client-a", To: "pod:web-a", Proto: "tcp", Sport: restartSport}
	ns, _, to := b.endpoints(c)
	sent := make(chan error, 1)
	go func() {
		_, err := netlab.Exec(context.Background(), ns, b.peer, "send", "-proto", "tcp", "-to", to.String(),
			"-bytes", fmt.Sprint(restartBytes), "-sport", fmt.Sprint(restartSport), "-over", restartSpread.String(), "-timeout", "30s")
		sent <- err
	}()

	time.Sleep(restartAfter)
	require.NotEmpty(t, nodeRecords(t, tap), "node-1 exported nothing of the transfer before the restart")
	require.NoError(t, b.nodes[0].Stop())
	time.Sleep(restartDown)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.nodes[0], _ = startCollector(t, ctx, b.nodeOptions[0])
	require.NoError(t, <-sent)

	var rs []flowrecord.Record
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs = nodeRecords(t, tap)
		if n := len(rs); n > 0 && rs[n-1].EndReason == flowrecord.EndReasonEndOfFlow || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	require.NotEmpty(t, rs)
	last := rs[len(rs)-1]
	require.Equal(t, flowrecord.EndReasonEndOfFlow, last.EndReason, "no end-of-flow record:\n%s", describeRecords(rs))
	var sum, rsum, psum, rpsum uint64
	for i, r := range rs {
		require.False(t, i < len(rs)-1 && r.EndReason == flowrecord.EndReasonEndOfFlow, "two end-of-flow records:\n%s", describeRecords(rs))
		sum, rsum, psum, rpsum = sum+r.Stats.OctetDelta, rsum+r.ReverseStats.OctetDelta, psum+r.Stats.PacketDelta, rpsum+r.ReverseStats.PacketDelta
	}
	require.True(t, sum == last.Stats.OctetTotal && rsum == last.ReverseStats.OctetTotal && psum == last.Stats.PacketTotal && rpsum == last.ReverseStats.PacketTotal,
		"node-1's deltas add up to %d/%d bytes %d/%d packets, its totals are %d/%d bytes %d/%d packets:\n%s",
		sum, rsum, psum, rpsum, last.Stats.OctetTotal, last.ReverseStats.OctetTotal, last.Stats.PacketTotal, last.ReverseStats.PacketTotal, describeRecords(rs))
	require.True(t, sum >= restartBytes && sum <= restartBytes+80*psum, "%d bytes over %d packets for the %d bytes sent", sum, psum, restartBytes)
	m, err := b.nodes[0].Metrics("otelcol_receiver_conntrack_resume_connections")
	require.NoError(t, err)
	require.Positive(t, sumSamples(m, `reason="resumed"`), "the restarted collector resumed nothing: %v", m)

	// The same sums at the end of the pipeline (the gateway adds up deltas).
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	deadline = time.Now().Add(30 * time.Second)
	for {
		var deltas, total uint64
		err := conn.QueryRow(context.Background(), `SELECT sum(octetDeltaCount), max(octetTotalCount) FROM flowtel_e2e.flows
			WHERE sourceTransportPort = ? AND protocolIdentifier = 6`, uint16(restartSport)).Scan(&deltas, &total)
		if err == nil && total == last.Stats.OctetTotal {
			require.Equal(t, total, deltas, "ClickHouse: the deltas add up to %d bytes, the total is %d", deltas, total)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClickHouse: total %d (want %d), %v", total, last.Stats.OctetTotal, err)
		}
		time.Sleep(time.Second)
	}
}

// nodeRecords decodes what node-1 exported for the restart test's connection.
func nodeRecords(t *testing.T, tap *consumertest.LogsSink) []flowrecord.Record {
	t.Helper()
	var out []flowrecord.Record
	for _, ld := range tap.AllLogs() {
		for i := range ld.ResourceLogs().Len() {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := range sls.Len() {
				lrs := sls.At(j).LogRecords()
				for k := range lrs.Len() {
					var r flowrecord.Record
					require.NoError(t, attrcodec.Decode(lrs.At(k), &r))
					if r.Reporter.NodeName == "node-1" && r.Source.Port == restartSport && r.Protocol == 6 {
						out = append(out, r)
					}
				}
			}
		}
	}
	return out
}

func describeRecords(rs []flowrecord.Record) string {
	var s strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&s, "  id %d end %s reason %v bytes %d (+%d) / %d (+%d) packets %d (+%d) / %d (+%d)\n", r.Conntrack.ID, r.End.Format(time.StampMilli), r.EndReason,
			r.Stats.OctetTotal, r.Stats.OctetDelta, r.ReverseStats.OctetTotal, r.ReverseStats.OctetDelta,
			r.Stats.PacketTotal, r.Stats.PacketDelta, r.ReverseStats.PacketTotal, r.ReverseStats.PacketDelta)
	}
	return s.String()
}

func sumSamples(m map[string]float64, label string) float64 {
	var n float64
	for k, v := range m {
		if strings.Contains(k, label) {
			n += v
		}
	}
	return n
}
