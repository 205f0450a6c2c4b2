//go:build integration

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/testbed/collector"
	"github.com/flowtel/flowtel/testbed/netlab"
)

// BenchmarkNodeCollectorEvents is the cost of the conntrack receiver's DESTROY
// events (on by default) at 1k and 10k new connections per second, next to
// the same churn with events off. A generator in the test process creates
// UDP conntrack entries from a local Pod to a remote one in Node 1's
// namespace at the rate, each deleted one second later (a DESTROY event), so
// about rate entries are live at any time. The node collector (5 s poll)
// reports them; with events off it misses every connection that lives
// between two polls. The storage variant adds the node distribution's
// file_storage checkpoint of the receiver. Measured over a 60 s window after a 15 s warm-up: the
// collector's CPU (share of one core, and per record accepted), RSS (mean
// and peak of one reading a second over the window, and at the end), the rate the generator reached, and the records the collector accepted
// per second.
// Run: make load (or -bench NodeCollectorEvents).
func BenchmarkNodeCollectorEvents(b *testing.B) {
	for _, rate := range []int{1000, 10_000} {
		for _, v := range []struct {
			name            string
			events, storage bool
		}{{"events=true", true, false}, {"events=false", false, false}, {"events=true+storage", true, true}} {
			b.Run(fmt.Sprintf("rate=%d/%s", rate, v.name), func(b *testing.B) { benchmarkNodeCollectorEvents(b, rate, v.events, v.storage) })
		}
	}
}

func benchmarkNodeCollectorEvents(b *testing.B, rate int, events, storage bool) {
	opt := options{gateways: 1, poll: 5 * time.Second, active: 5 * time.Second, idle: 15 * time.Second, nodeStorage: storage}
	if !events {
		opt.conntrackExtra = ", events: false"
	}
	bed := startBed(b, opt)
	client, server := bed.pods["client-a"], bed.pods["web-b"]
	node := bed.nodes[0]
	gen := startChurn(b, bed.lab.Nodes[0], client.IPv4, server.IPv4, rate, time.Second)
	defer gen.stop()

	time.Sleep(15 * time.Second)
	window := 60 * time.Second
	b.ResetTimer()
	for range b.N {
		accepted0 := acceptedRecords(b, node)
		made0 := gen.created()
		rss := sampleRSS(node, time.Second)
		cpu := cpuShare(b, node, window)
		rssMean, rssMax := rss.stop()
		b.ReportMetric(rssMean/(1<<20), "rss-mean-MB")
		b.ReportMetric(rssMax/(1<<20), "rss-max-MB")
		records := (acceptedRecords(b, node) - accepted0) / window.Seconds()
		b.ReportMetric(cpu, "cpu-%/core")
		b.ReportMetric(float64(gen.created()-made0)/window.Seconds(), "conns/s")
		b.ReportMetric(records, "records/s")
		// CPU per connection reported: compares across runs whatever rate
		// the generator reached on a busy machine.
		b.ReportMetric(cpu/100*1e6/max(records, 1), "cpu-µs/record")
	}
	rss, err := node.RSS()
	require.NoError(b, err)
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
	m, err := node.Metrics("otelcol_receiver_conntrack_events")
	require.NoError(b, err)
	for k, v := range m {
		if strings.Contains(k, "queue_full") && v > 0 {
			b.Logf("events shed by the full queue: %.0f", v)
		}
	}
	if e := gen.err(); e != nil {
		b.Fatalf("churn generator: %v", e)
	}
}

// rssSampler reads a collector's RSS at an interval until stopped.
type rssSampler struct {
	done      chan struct{}
	wg        sync.WaitGroup
	sum, peak float64
	n         int
}

// sampleRSS samples p's RSS every interval: one reading at the end of a run
// depends on where it falls between two polls' exports.
func sampleRSS(p *collector.Process, interval time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if v, err := p.RSS(); err == nil {
					s.sum += float64(v)
					s.peak = max(s.peak, float64(v))
					s.n++
				}
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the mean and the peak.
func (s *rssSampler) stop() (mean, peak float64) {
	close(s.done)
	s.wg.Wait()
	return s.sum / float64(max(s.n, 1)), s.peak
}

// acceptedRecords is how many records a collector's receivers accepted so far.
func acceptedRecords(b testing.TB, p *collector.Process) float64 {
	m, err := p.Metrics("otelcol_receiver_accepted_log_records")
	require.NoError(b, err)
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}

// churn creates conntrack entries at a rate and deletes each one after a
// lifetime, from its own goroutine.
type churn struct {
	c    *conntrack.Conn
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	made int
	fail error
}

func startChurn(b *testing.B, node *netlab.Node, src, dst netip.Addr, rate int, life time.Duration) *churn {
	f, err := os.Open(netlab.NetNSPath(node.NS))
	require.NoError(b, err)
	defer f.Close()
	c, err := conntrack.Dial(&netlink.Config{NetNS: int(f.Fd())})
	require.NoError(b, err)
	g := &churn{c: c, done: make(chan struct{})}
	g.wg.Add(1)
	go g.run(src, dst, rate, life)
	return g
}

func (g *churn) run(src, dst netip.Addr, rate int, life time.Duration) {
	defer g.wg.Done()
	const tick = 10 * time.Millisecond
	perTick := max(1, rate*int(tick)/int(time.Second))
	type live struct {
		f    conntrack.Flow
		dies time.Time
	}
	var alive []live
	t := time.NewTicker(tick)
	defer t.Stop()
	for i := 0; ; {
		select {
		case <-g.done:
			return
		case now := <-t.C:
			for range perTick {
				// Distinct tuples for a long while: source ports, then destination ports.
				f := conntrack.NewFlow(17, 0, src, dst, uint16(1024+i%60000), uint16(1000+(i/60000)%50000), 30, 0)
				i++
				if err := g.c.Create(f); err != nil {
					g.setErr(err)
					return
				}
				alive = append(alive, live{f, now.Add(life)})
			}
			g.mu.Lock()
			g.made += perTick
			g.mu.Unlock()
			n := 0
			for n < len(alive) && !alive[n].dies.After(now) {
				if err := g.c.Delete(alive[n].f); err != nil {
					g.setErr(err)
					return
				}
				n++
			}
			alive = append(alive[:0], alive[n:]...)
		}
	}
}

func (g *churn) setErr(err error) {
	g.mu.Lock()
	g.fail = err
	g.mu.Unlock()
}

func (g *churn) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fail
}

func (g *churn) created() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.made
}

func (g *churn) stop() {
	close(g.done)
	g.wg.Wait()
	g.c.Close()
}
