//go:build integration

package conntrackreceiver

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

// Environment of the churn generator child (TestChurnChild).
const (
	churnNetNSEnv = "FLOWTEL_CHURN_NETNS"
	churnRateEnv  = "FLOWTEL_CHURN_RATE"
)

// BenchmarkEventsChurn is the whole receiver's CPU per connection reported
// with DESTROY events on, under churn: a child process (this test binary,
// TestChurnChild) creates UDP conntrack entries in a namespace at rate/s and
// deletes each a second later, so every connection ends in a DESTROY event
// the receiver must receive, decode, queue, store and export as an
// end-of-flow record (to a consumer that only counts). The kernel's work for
// the entries runs in the child; the CPU measured (getrusage of this process,
// which runs nothing else) is the receiver's: netlink receive and decode,
// the hand-off to the poll loop, the store, the polls (about rate entries
// live) and the record encoding. It is read over a window after a warm-up,
// so it compares binaries on a noisy machine, unlike wall time. Run with
// -benchtime=1x; the testbed's BenchmarkNodeCollectorEvents measures the
// whole node collector (k8s_flow, load_balancing, OTLP) on top.
func BenchmarkEventsChurn(b *testing.B) {
	for _, rate := range []int{1000, 10_000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) { benchmarkEventsChurn(b, rate) })
	}
}

func benchmarkEventsChurn(b *testing.B, rate int) {
	path := benchNamespace(b, fmt.Sprintf("fcch%d-%d", os.Getpid(), rate))

	tel := componenttest.NewTelemetry()
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	cfg := createDefaultConfig()
	cfg.NetNS = path
	cfg.PollInterval = 5 * time.Second
	cfg.Events = true
	var records atomic.Int64
	next, err := consumer.NewLogs(func(_ context.Context, ld plog.Logs) error {
		records.Add(int64(ld.LogRecordCount()))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	rcv, err := NewFactory().CreateLogs(context.Background(), set, cfg, next)
	if err != nil {
		b.Fatal(err)
	}
	if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rcv.Shutdown(context.Background()) }()

	child := exec.Command(os.Args[0], "-test.run=^TestChurnChild$", "-test.count=1")
	child.Env = append(os.Environ(), churnNetNSEnv+"="+path, churnRateEnv+"="+strconv.Itoa(rate))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()

	time.Sleep(10 * time.Second) // warm-up: a full second of live entries, two polls
	window := 30 * time.Second
	h := &harness{t: b, tel: tel}
	b.ResetTimer()
	for range b.N {
		rec0, cpu0 := records.Load(), cpuTime()
		time.Sleep(window)
		rec, cpu := records.Load()-rec0, cpuTime()-cpu0
		b.ReportMetric(float64(cpu.Microseconds())/float64(max(rec, 1)), "cpu-µs/conn")
		b.ReportMetric(100*float64(cpu)/float64(window), "cpu-%/core")
		b.ReportMetric(float64(rec)/window.Seconds(), "records/s")
	}
	b.StopTimer()
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MB")
	if n := h.counter("otelcol_receiver_conntrack_events", "queue_full"); n > 0 {
		b.Logf("events shed by the full queue: %d", n)
	}
	if n := h.counter("otelcol_receiver_conntrack_netlink_errors", ""); n > 0 {
		b.Logf("netlink errors: %d", n)
	}
}

// cpuTime is this process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestChurnChild is BenchmarkEventsChurn's generator, run as a child
// process (skipped otherwise): it creates UDP entries in the namespace at the
// rate and deletes each one a second later, until killed.
func TestChurnChild(t *testing.T) {
	path, rate := os.Getenv(churnNetNSEnv), os.Getenv(churnRateEnv)
	if path == "" {
		t.Skip("BenchmarkEventsChurn's generator; runs only as its child")
	}
	n, err := strconv.Atoi(rate)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := conntrack.Dial(&netlink.Config{NetNS: int(f.Fd())})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, dst := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.2.0.1")
	const tick, life = 10 * time.Millisecond, time.Second
	perTick := max(1, n*int(tick)/int(time.Second))
	type live struct {
		f    conntrack.Flow
		dies time.Time
	}
	var alive []live
	t0 := time.NewTicker(tick)
	defer t0.Stop()
	for i := 0; ; {
		now := <-t0.C
		for range perTick {
			fl := conntrack.NewFlow(17, 0, src, dst, uint16(1024+i%60000), uint16(1000+(i/60000)%50000), 30, 0)
			i++
			if err := c.Create(fl); err != nil {
				t.Fatal(err)
			}
			alive = append(alive, live{fl, now.Add(life)})
		}
		k := 0
		for k < len(alive) && !alive[k].dies.After(now) {
			if err := c.Delete(alive[k].f); err != nil {
				t.Fatal(err)
			}
			k++
		}
		alive = append(alive[:0], alive[k:]...)
	}
}
