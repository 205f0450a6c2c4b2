//go:build integration

// Package flood runs the built collectors against floods on loopback: a
// node collector whose network namespace holds a million conntrack entries.
package flood

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/distributions"
	"github.com/flowtel/flowtel/testbed/collector"
	"github.com/flowtel/flowtel/testbed/netlab"
)

func repoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..")
}

const conntrackMax = "/proc/sys/net/netfilter/nf_conntrack_max"

// The node collector, on its shipped configuration (memory_limiter
// included) with the conntrack receiver pointed at a test namespace and a
// debug exporter, while that namespace's table grows to 100k and 500k
// entries (and 1M with FLOWTEL_FLOOD_1M=1) (created through netlink; nf_conntrack_max, a host-wide setting
// that only the initial namespace may write, is raised for the test and put
// back). max_connections is 100k: the connections over it are shed and
// counted, the process's RSS stays bounded by what it holds, and the polls
// keep their 5 s period. The figures go to the log (testbed/results.md).
func TestNodeCollectorMillionEntries(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and conntrack over netlink")
	}
	// At every level the process stays under the DaemonSet's 512 MiB limit
	// (the receiver streams the dump: its memory follows max_connections,
	// not the table), each connection over max_connections is counted as
	// shed once, and polls keep their period (within half a period: the
	// machine is shared): asserted. Poll duration, the collector's CPU per
	// poll and the polls that overran are logged (testbed/results.md).
	const maxConns, poll, rssBound = 100_000, 5 * time.Second, 512 << 20
	old, err := os.ReadFile(conntrackMax)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(conntrackMax, []byte("1100000"), 0o644))
	t.Cleanup(func() { _ = os.WriteFile(conntrackMax, old, 0o644) })

	ns := "flowtel-flood-" + strconv.Itoa(os.Getpid())
	require.NoError(t, exec.Command("ip", "netns", "add", ns).Run())
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })

	bin, err := collector.Binary(repoRoot(), distributions.Node)
	require.NoError(t, err)
	health, metrics := freePort(t), freePort(t)
	overlay := fmt.Sprintf(`
extensions:
  health_check: {endpoint: "127.0.0.1:%d"}
receivers:
  conntrack: {netns: %s, poll_interval: %s, events: false, storage: null, max_connections: %d}
exporters:
  debug: {verbosity: basic}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]
  pipelines:
    logs: {processors: [memory_limiter], exporters: [debug]}
`, health, netlab.NetNSPath(ns), poll, maxConns, metrics)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := collector.Start(ctx, collector.Options{Name: "node", Binary: bin, Dir: t.TempDir(),
		Configs: []string{distributions.Config(distributions.Node)}, Config: overlay,
		Env:        []string{"K8S_NODE_NAME=node-1", "POD_NAMESPACE=flowtel"},
		HealthPort: health, MetricsPort: metrics})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("node: %v", err)
		}
		if t.Failed() {
			t.Logf("node log:\n%s", p.LogTail(30))
		}
	})

	f, err := os.Open(netlab.NetNSPath(ns))
	require.NoError(t, err)
	defer f.Close()
	c, err := conntrack.Dial(&netlink.Config{NetNS: int(f.Fd())})
	require.NoError(t, err)
	defer c.Close()
	filler := newFiller(t, int(f.Fd()))

	created := 0
	var peakRSS int64
	levels := []int{100_000, 500_000}
	if os.Getenv("FLOWTEL_FLOOD_1M") != "" { // about 40 s more
		levels = append(levels, 1_000_000)
	}
	for _, level := range levels {
		start := time.Now()
		filler.fill(t, created, level)
		created = level
		fill := time.Since(start)
		// Two polls after the table reached the level: the second one's
		// duration is the steady one.
		polls, _ := pollStats(t, p)
		deadline := time.Now().Add(3 * time.Minute)
		for {
			time.Sleep(time.Second)
			n, _ := pollStats(t, p)
			if n >= polls+2 {
				break
			}
			require.True(t, time.Now().Before(deadline), "no polls at %d entries", level)
		}
		n1, s1 := pollStats(t, p)
		cpu1, err := p.CPUTime()
		require.NoError(t, err)
		measured := time.Now()
		for n, _ := pollStats(t, p); n < n1+3; n, _ = pollStats(t, p) {
			time.Sleep(200 * time.Millisecond)
		}
		n2, s2 := pollStats(t, p)
		period := time.Since(measured) / time.Duration(n2-n1)
		cpu2, err := p.CPUTime()
		require.NoError(t, err)
		rss, err := p.RSS()
		require.NoError(t, err)
		peakRSS = max(peakRSS, rss)
		entries := sumOf(t, p, "otelcol_receiver_conntrack_entries")
		held := sumOf(t, p, "otelcol_receiver_conntrack_connections")
		shed := sumOf(t, p, "otelcol_receiver_conntrack_connections_shed")
		overruns := sumOf(t, p, "otelcol_receiver_conntrack_polls_overrun")
		t.Logf("%d entries (filled in %v): poll duration %.2f s (mean of %d), collector CPU %.2f s per poll, polls every %v (poll_interval %v), RSS %d MB, entries polled %.0f, held %.0f, shed %.0f, polls overrun so far %.0f",
			level, fill.Round(100*time.Millisecond), (s2-s1)/(n2-n1), int(n2-n1), (cpu2-cpu1).Seconds()/(n2-n1), period.Round(100*time.Millisecond), poll, rss>>20, entries, held, shed, overruns)
		require.GreaterOrEqual(t, entries, float64(level), "the poll did not see the table")
		require.LessOrEqual(t, held, float64(maxConns), "connections held over max_connections")
		require.Equal(t, float64(max(0, level-maxConns)), shed, "connections over max_connections not counted once each as shed")
		require.Less(t, rss, int64(rssBound), "RSS over the DaemonSet's memory limit")
		require.Less(t, period, poll+poll/2, "polls fell behind their period")
	}
	t.Logf("peak RSS %d MB", peakRSS>>20)
	// An empty table before the collector stops: its last poll and flush are short.
	require.NoError(t, c.Flush())
}

// pollStats returns the conntrack receiver's poll count and total duration.
func pollStats(t *testing.T, p *collector.Process) (count, sum float64) {
	t.Helper()
	m, err := p.Metrics("otelcol_receiver_conntrack_poll_duration")
	require.NoError(t, err)
	for k, v := range m {
		name, _, _ := strings.Cut(k, "{")
		switch {
		case strings.HasSuffix(name, "_count"):
			count += v
		case strings.HasSuffix(name, "_sum"):
			sum += v
		}
	}
	return count, sum
}

// sumOf sums the samples of exactly one metric name (any labels, with or
// without the _total suffix).
func sumOf(t *testing.T, p *collector.Process, name string) float64 {
	t.Helper()
	m, err := p.Metrics(name)
	require.NoError(t, err)
	var n float64
	for k, v := range m {
		if base, _, _ := strings.Cut(k, "{"); base == name || base == name+"_total" {
			n += v
		}
	}
	return n
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := collector.FreePort()
	require.NoError(t, err)
	return p
}
