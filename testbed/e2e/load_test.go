//go:build integration

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/testbed/collector"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// BenchmarkNodeCollector is the load run behind architecture §6's "node collector,
// 10k conns, 5 s poll: ≤ 5 % of a core", at 10k and 100k connections. Node 1's
// table holds the live connections from a local Pod to a remote one (created
// through netlink, so the count is exact); the node collector polls every 5 s,
// names both endpoints and ships each connection to the gateway. After a
// warm-up that exports every connection once, it measures the node collector's
// CPU time over a window of polls. Reported: cpu-%/core (of one core), rss-MB.
// Run: make load.
func BenchmarkNodeCollector(b *testing.B) {
	for _, conns := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) { benchmarkNodeCollector(b, conns) })
	}
}

func benchmarkNodeCollector(b *testing.B, conns int) {
	bed := startBed(b, options{gateways: 1, poll: 5 * time.Second, active: 5 * time.Second, idle: 15 * time.Second})
	client, server := bed.pods["client-a"], bed.pods["web-b"]
	fillTable(b, bed.lab.Nodes[0], client.IPv4, server.IPv4, conns)
	node := bed.nodes[0]

	warmUp := 30 * time.Second
	if conns > 10_000 {
		warmUp = 90 * time.Second
	}
	time.Sleep(warmUp) // every connection exported once, then idle
	window := 60 * time.Second
	b.ResetTimer()
	for range b.N {
		b.ReportMetric(cpuShare(b, node, window), "cpu-%/core")
	}
	rss, err := node.RSS()
	require.NoError(b, err)
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
	if accepted := acceptedRecords(b, node); accepted < float64(conns) {
		b.Errorf("the node collector accepted %.0f records, want at least one per connection (%d)", accepted, conns)
	}
}

// fillTable creates n UDP conntrack entries src:port → dst:53 in node's namespace.
func fillTable(b *testing.B, node *netlab.Node, src, dst netip.Addr, n int) {
	b.Helper()
	f, err := os.Open(netlab.NetNSPath(node.NS))
	require.NoError(b, err)
	defer f.Close()
	c, err := conntrack.Dial(&netlink.Config{NetNS: int(f.Fd())})
	require.NoError(b, err)
	defer c.Close()
	for i := range n {
		// distinct source ports, then destination ports, for distinct tuples
		flow := conntrack.NewFlow(17, 0, src, dst, uint16(1024+i%60000), uint16(53+i/60000), 3600, 0)
		require.NoError(b, c.Create(flow), "entry %d", i)
	}
}

// cpuShare waits for window and returns the CPU time p used in it, as a
// percentage of one core.
func cpuShare(b *testing.B, p *collector.Process, window time.Duration) float64 {
	before, err := p.CPUTime()
	require.NoError(b, err)
	time.Sleep(window)
	after, err := p.CPUTime()
	require.NoError(b, err)
	return 100 * float64(after-before) / float64(window)
}
