//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/testbed/netlab"
)

// Restarts change nothing (decision D10): the tests below restart a tier of
// the bed, run as the shipped configurations run (asShipped: file_storage on
// the nodes, denied connections, the gateway's Kubernetes index; the node's
// idle timeout of 1 s), in the middle of real traffic, and require every
// connection to be one record chain in ClickHouse whose deltas add up to its
// totals: no row counted twice, none lost.

// shippedTimers are the shipped node configuration's timers.
func shippedTimers() options {
	return options{gateways: 1, asShipped: true, poll: time.Second, active: 2 * time.Second, idle: time.Second}
}

// chain is what ClickHouse holds of one connection.
type chain struct {
	rows, notPaired, ends                  uint64
	deltas, total, reverseDeltas, revTotal uint64
	packetDeltas, packets, reversePackets  uint64
	reversePacketDeltas                    uint64
}

func (c chain) String() string {
	return fmt.Sprintf("%d rows (%d not paired, %d end of flow), bytes %d deltas / %d total, reverse %d / %d, packets %d / %d, reverse %d / %d",
		c.rows, c.notPaired, c.ends, c.deltas, c.total, c.reverseDeltas, c.revTotal, c.packetDeltas, c.packets, c.reversePacketDeltas, c.reversePackets)
}

// whole reports whether c is one paired chain that ended and adds up.
func (c chain) whole() bool {
	return c.rows > 0 && c.notPaired == 0 && c.ends == 1 && c.deltas == c.total && c.reverseDeltas == c.revTotal &&
		c.packetDeltas == c.packets && c.reversePacketDeltas == c.reversePackets
}

func readChain(conn clickhouse.Conn, sport uint16) (chain, error) {
	var c chain
	err := conn.QueryRow(context.Background(), `SELECT count(), countIf(correlationState != 'paired'), countIf(flowEndReason = 3),
		sum(octetDeltaCount), max(octetTotalCount), sum(reverseOctetDeltaCount), max(reverseOctetTotalCount),
		sum(packetDeltaCount), max(packetTotalCount), sum(reversePacketDeltaCount), max(reversePacketTotalCount)
		FROM flowtel_e2e.flows WHERE sourceTransportPort = ? AND protocolIdentifier = 6`, sport).Scan(
		&c.rows, &c.notPaired, &c.ends, &c.deltas, &c.total, &c.reverseDeltas, &c.revTotal,
		&c.packetDeltas, &c.packets, &c.reversePacketDeltas, &c.reversePackets)
	return c, err
}

// waitChains waits until every source port in sports is one whole chain, and
// then holds on for settle, in which no row may come to spoil it (a half
// reported again goes out unpaired one pairing timeout later).
func (b *bed) waitChains(t *testing.T, sports []uint16, timeout, settle time.Duration) map[uint16]chain {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{b.ch.Addr()}})
	require.NoError(t, err)
	defer conn.Close()
	read := func() (map[uint16]chain, []string) {
		got := map[uint16]chain{}
		var bad []string
		for _, p := range sports {
			c, err := readChain(conn, p)
			require.NoError(t, err)
			got[p] = c
			if !c.whole() {
				bad = append(bad, fmt.Sprintf("port %d: %s", p, c))
			}
		}
		return got, bad
	}
	deadline := time.Now().Add(timeout)
	for {
		_, bad := read()
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections not one whole chain after %s:\n%s\n%s", timeout, strings.Join(bad, "\n"), dumpRows(conn, sports))
		}
		time.Sleep(time.Second)
	}
	time.Sleep(settle)
	got, bad := read()
	require.Empty(t, bad, "rows came after the connections were whole:\n%s", dumpRows(conn, sports))
	return got
}

// dumpRows lists the rows of the connections from sports, for a failure.
func dumpRows(conn clickhouse.Conn, sports []uint16) string {
	var s strings.Builder
	for _, p := range sports {
		rows, err := conn.Query(context.Background(), `SELECT toString(flowEndSeconds), toString(flowEndSecondsFromSourceNode),
			toString(flowEndSecondsFromDestinationNode), flowEndReason, correlationState, octetDeltaCount, octetTotalCount,
			toString(timeInserted) FROM flowtel_e2e.flows WHERE sourceTransportPort = ? AND protocolIdentifier = 6
			ORDER BY timeInserted, flowEndSeconds`, p)
		if err != nil {
			return err.Error()
		}
		fmt.Fprintf(&s, "port %d:\n", p)
		for rows.Next() {
			var end, srcEnd, dstEnd, state, inserted string
			var reason uint8
			var delta, total uint64
			if err := rows.Scan(&end, &srcEnd, &dstEnd, &reason, &state, &delta, &total, &inserted); err != nil {
				return err.Error()
			}
			fmt.Fprintf(&s, "  end %s (source %s, destination %s) reason %d %s bytes +%d = %d, inserted %s\n",
				end, srcEnd, dstEnd, reason, state, delta, total, inserted)
		}
		rows.Close()
	}
	return s.String()
}

// restartNode stops node collector i with SIGTERM, as a DaemonSet rollout
// does, and starts it again on the same storage.
func (b *bed) restartNode(t *testing.T, i int, down time.Duration) {
	t.Helper()
	require.NoError(t, b.nodes[i].Stop())
	time.Sleep(down)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.nodes[i], _ = startCollector(t, ctx, b.nodeOptions[i])
}

// restartGateway does the same to gateway i (a Deployment rollout).
func (b *bed) restartGateway(t *testing.T, i int, down time.Duration) {
	t.Helper()
	require.NoError(t, b.gateways[i].Stop())
	time.Sleep(down)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.gateways[i], _ = startCollector(t, ctx, b.gatewayOptions[i])
}

// transfers starts, for each source port, a TCP transfer of n bytes spread
// over d from client-a (node-1) to web-b (node-2), odd ports over IPv6; the
// returned func waits for them all.
func (b *bed) transfers(t *testing.T, sports []uint16, n int, d time.Duration) func() {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(sports))
	for i, sp := range sports {
		c := Case{From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: sp, IPv6: sp%2 == 1}
		ns, _, to := b.endpoints(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := netlab.Exec(context.Background(), ns, b.peer, "send", "-proto", "tcp", "-to", to.String(),
				"-bytes", fmt.Sprint(n), "-sport", fmt.Sprint(sp), "-over", d.String(), "-timeout", (d + 30*time.Second).String())
			if err != nil {
				errs[i] = fmt.Errorf("port %d: %v: %s", sp, err, out)
			}
		}()
	}
	return func() {
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
}

func portRange(from uint16, n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = from + uint16(i)
	}
	return out
}

// TestNodeRestartsWithClosingConnections: dozens of inter-Node connections
// closed (in TIME_WAIT on both Nodes, their end-of-flow records exported and
// paired) and long transfers still running when node-1's collector restarts,
// then node-2's: no connection is reported again, none loses a byte.
func TestNodeRestartsWithClosingConnections(t *testing.T) {
	b := startBed(t, shippedTimers())
	closed := portRange(42100, 30)
	long := portRange(42200, 2)
	wait := b.transfers(t, long, 300_000, 20*time.Second)
	res := b.sendAll(casesFor(closed), func(Case) []string { return []string{"-bytes", fmt.Sprint(requestBytes)} })
	for i, r := range res {
		require.NoError(t, r.err, "port %d: %s", closed[i], r.out)
	}
	// Their end-of-flow records are out and paired before the restarts.
	b.waitChains(t, closed, 60*time.Second, 0)
	b.restartNode(t, 0, 2*time.Second)
	time.Sleep(3 * time.Second)
	b.restartNode(t, 1, 2*time.Second)
	wait()
	// A half reported again would go out unpaired after the pairing timeout
	// (10 s here) and the node's active timeout: settle beyond both.
	chains := b.waitChains(t, append(closed, long...), 90*time.Second, 15*time.Second)
	for _, p := range long {
		require.GreaterOrEqual(t, chains[p].total, uint64(300_000), "port %d: %s", p, chains[p])
	}
	for i, n := range b.nodes[:2] { // the two restarted
		m, err := n.Metrics("otelcol_receiver_conntrack_resume_connections")
		require.NoError(t, err)
		require.Positive(t, sumSamples(m, `reason="closed"`), "node-%d held no closed connection after its restart: %v", i+1, m)
	}
}

// casesFor are client-a → web-b connections from the given source ports,
// odd ports over IPv6.
func casesFor(sports []uint16) []Case {
	var out []Case
	for _, sp := range sports {
		out = append(out, Case{Name: fmt.Sprint(sp), From: "pod:client-a", To: "pod:web-b", Proto: "tcp", Sport: sp, IPv6: sp%2 == 1})
	}
	return out
}

// TestGatewayRestartMidTransfer: the gateway stopped with SIGTERM in the
// middle of steady inter-Node downloads and started again: the old process
// flushes what it holds, the new one starts with an empty table, and the
// rows of both add up to the totals, one chain ending in one end of flow.
func TestGatewayRestartMidTransfer(t *testing.T) {
	b := startBed(t, shippedTimers())
	sports := portRange(42300, 2)
	wait := b.transfers(t, sports, 500_000, 12*time.Second)
	time.Sleep(4 * time.Second)
	b.restartGateway(t, 0, 0)
	wait()
	chains := b.waitChains(t, sports, 90*time.Second, 12*time.Second)
	for _, p := range sports {
		require.GreaterOrEqual(t, chains[p].total, uint64(500_000), "port %d: %s", p, chains[p])
		require.Greater(t, chains[p].rows, uint64(2), "port %d: the transfer spans the restart in several rows: %s", p, chains[p])
	}
}

// TestGatewayRollingRestart: two gateway replicas restarted one after the
// other (a rolling update) during inter-Node transfers hashed to both.
func TestGatewayRollingRestart(t *testing.T) {
	opt := shippedTimers()
	opt.gateways = 2
	b := startBed(t, opt)
	sports := portRange(42400, 8)
	wait := b.transfers(t, sports, 300_000, 16*time.Second)
	time.Sleep(4 * time.Second)
	b.restartGateway(t, 0, time.Second)
	time.Sleep(3 * time.Second)
	b.restartGateway(t, 1, time.Second)
	wait()
	chains := b.waitChains(t, sports, 90*time.Second, 12*time.Second)
	for _, p := range sports {
		require.GreaterOrEqual(t, chains[p].total, uint64(300_000), "port %d: %s", p, chains[p])
	}
}

// TestGatewayRestartWhileItsSinkStalls: ClickHouse stalls (SIGSTOP) under
// steady inter-Node transfers, the gateway's small sending queue fills, and
// the gateway is restarted (SIGTERM, ClickHouse let go 2 s later) while it
// holds exports it cannot hand on: every transfer is still one chain whose
// deltas add up, nothing lost in the stopping gateway's exports and nothing
// counted twice by its successor. (The gateway answering before the node's
// deadline is proven by flow_correlation's own tests; this bed did not make
// the node's attempts time out before the fix either, so it does not show
// the repeat that fix removes.)
func TestGatewayRestartWhileItsSinkStalls(t *testing.T) {
	opt := shippedTimers()
	opt.chQueue = "{queue_size: 4, num_consumers: 1, batch: {flush_timeout: 200ms, min_size: 1, max_size: 4}}"
	b := startBed(t, opt)
	t.Cleanup(b.ch.Resume) // a failing test must not leave the server stopped
	sports := portRange(42500, 4)
	wait := b.transfers(t, sports, 400_000, 35*time.Second)
	time.Sleep(4 * time.Second)
	t.Log("ClickHouse paused")
	b.ch.Pause()
	// Long enough for the queue to fill and the gateway to hold exports.
	time.Sleep(16 * time.Second)
	time.AfterFunc(2*time.Second, func() { t.Log("ClickHouse resumed"); b.ch.Resume() })
	b.restartGateway(t, 0, 0)
	wait()
	chains := b.waitChains(t, sports, 2*time.Minute, 12*time.Second)
	for _, p := range sports {
		require.GreaterOrEqual(t, chains[p].total, uint64(400_000), "port %d: %s", p, chains[p])
	}
}
