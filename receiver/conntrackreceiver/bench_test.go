//go:build integration

package conntrackreceiver

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

const benchEntries = 100_000

// eventsPerRead is how many DESTROY events BenchmarkDestroyEvents queues at a
// time: about what one read of the event socket takes at 10k connections/s.
const eventsPerRead = 100

// benchTable creates a namespace holding benchEntries UDP conntrack entries
// (created through netlink) and returns its path.
func benchTable(b *testing.B) string { return benchTableOf(b, benchEntries) }

// benchNamespace creates an empty network namespace, removed at the end of
// the benchmark, and returns its path; it skips without root.
func benchNamespace(b testing.TB, name string) string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root: creates a network namespace and conntrack entries")
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		b.Fatalf("ip netns add: %v %s", err, out)
	}
	b.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return "/var/run/netns/" + name
}

// benchTableOf creates a namespace holding n UDP conntrack entries.
func benchTableOf(b testing.TB, n int) string {
	b.Helper()
	path := benchNamespace(b, fmt.Sprintf("fctb%d-%d", os.Getpid(), n))
	ns, err := ctsource.OpenNamespace(path)
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	c, err := conntrack.Dial(&netlink.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := range n {
		src := netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)})
		dst := netip.AddrFrom4([4]byte{10, 200, byte(i >> 16), byte(i % 7)})
		f := conntrack.NewFlow(17, 0, src, dst, uint16(1024+i%60000), 53, 3600, 0x42)
		if err := c.Create(f); err != nil {
			b.Fatalf("create entry %d: %v", i, err)
		}
	}
	return path
}

// BenchmarkPoll100k compares, on one table of 100k real entries, the raw
// netlink dump of the library (the floor) with the receiver's poll: the same
// dump plus conversion, profile and connection store update. live-MB is the
// heap still in use after the polls (the store of 100k connections).
func BenchmarkPoll100k(b *testing.B) {
	path := benchTable(b)
	ns, err := ctsource.OpenNamespace(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Close() })

	b.Run("raw_dump", func(b *testing.B) {
		src, err := ctsource.Dial(ns)
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		b.ReportAllocs()
		var n int
		for b.Loop() {
			if n, err = src.DumpZone(0, func(*store.Conn) {}); err != nil {
				b.Fatal(err)
			}
		}
		if n != benchEntries {
			b.Fatalf("dumped %d entries, want %d", n, benchEntries)
		}
		reportPerEntry(b, n)
	})

	b.Run("update_only", func(b *testing.B) { benchmarkUpdateOnly(b, ns) })

	b.Run("poll", func(b *testing.B) {
		cfg := createDefaultConfig()
		cfg.NetNS = path
		r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		r.ns = ns
		if r.src, err = ctsource.Dial(ns); err != nil {
			b.Fatal(err)
		}
		defer r.src.Close()
		now := time.Now()
		// Steady state: the first polls insert the 100k connections and
		// export their first (active) and second (idle) records; the
		// measured polls then find the same table again.
		for range 3 {
			now = now.Add(cfg.PollInterval)
			if err := r.dump(now); err != nil {
				b.Fatal(err)
			}
			r.exports = r.store.Expired(now, r.exports[:0])
		}
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(cfg.PollInterval)
			if err := r.dump(now); err != nil {
				b.Fatal(err)
			}
			r.exports = r.store.Expired(now, r.exports[:0])
		}
		if r.store.Len() != benchEntries {
			b.Fatalf("store holds %d connections, want %d", r.store.Len(), benchEntries)
		}
		reportPerEntry(b, benchEntries)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MB")
		runtime.KeepAlive(r)
	})
}

// reportPerEntry adds ms per poll and µs per entry (allocs and bytes per
// entry follow from allocs/op and B/op divided by the entries).
// BenchmarkPoll100k's overhead over the raw dump, measured alone: conversion,
// profile and store update of one dump of 100k real entries, dumped once.
func benchmarkUpdateOnly(b *testing.B, ns *ctsource.Namespace) {
	src, err := ctsource.Dial(ns)
	if err != nil {
		b.Fatal(err)
	}
	var conns []store.Conn
	_, err = src.DumpZone(0, func(c *store.Conn) { conns = append(conns, *c) })
	src.Close()
	if err != nil {
		b.Fatal(err)
	}
	r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	update := func() {
		now = now.Add(5 * time.Second)
		r.store.BeginPoll(now)
		r.prof.Begin(now, nil)
		var c store.Conn
		for i := range conns {
			c = conns[i]
			r.prof.Offer(0, &c, r.observeFn)
		}
		r.prof.End(r.observeFn)
		r.store.EndPoll()
		r.exports = r.store.Expired(now, r.exports[:0])
	}
	for range 3 {
		update()
	}
	b.ReportAllocs()
	for b.Loop() {
		update()
	}
	reportPerEntry(b, len(conns))
}

// dumpAll collects the flows of a namespace's table through the library (the
// event benchmarks replay them as DESTROY events).
func dumpAll(ns *ctsource.Namespace) ([]conntrack.Flow, error) {
	c, err := conntrack.Dial(&netlink.Config{NetNS: ns.FD()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Dump(nil)
}

func reportPerEntry(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/poll")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/entry")
}

// BenchmarkEncodeRecords measures turning store exports into plog records.
func BenchmarkEncodeRecords(b *testing.B) {
	x := store.Export{Conn: store.Conn{Key: store.Key{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 40000, DstPort: 80, Proto: 6}, OrigDst: netip.MustParseAddr("10.96.0.1"), OrigDstPort: 80, TCPState: 3,
		Orig: store.Counters{Packets: 10, Bytes: 1000}}, Start: time.Now(), End: time.Now(), Reason: flowrecord.EndReasonActiveTimeout}
	xs := make([]store.Export, 1000)
	for i := range xs {
		xs[i] = x
		xs[i].Conn.SrcPort += uint16(i)
	}
	r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.send(context.Background(), xs, time.Now())
	}
	b.ReportMetric(float64(len(xs)*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDestroyEvents is the receiver's own cost of DESTROY events: one op
// is 10,000 events (real flows, as the kernel dumps them) queued by the event
// goroutine, eventsPerRead at a time (as one read at 10k/s takes them), and
// applied to the store by the poll loop (queue_and_store), plus their export
// as 10,000 end-of-flow records to a no-op consumer (with_export: the record
// encoding any reported connection costs). Netlink receive and decode are not
// in it (BenchmarkEventsChurn has them); the testbed run
// BenchmarkNodeCollectorEvents measures the whole collector.
func BenchmarkDestroyEvents(b *testing.B) {
	const n = 10_000
	path := benchTableOf(b, n)
	ns, err := ctsource.OpenNamespace(path)
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	flows, err := dumpAll(ns)
	if err != nil || len(flows) != n {
		b.Fatalf("dumped %d entries (%v), want %d", len(flows), err, n)
	}
	conns := make([]store.Conn, len(flows))
	for i := range flows {
		ctsource.Convert(&flows[i], &conns[i])
	}
	for _, withExport := range []bool{false, true} {
		name := "queue_and_store"
		if withExport {
			name = "with_export"
		}
		b.Run(name, func(b *testing.B) { benchmarkDestroyEvents(b, conns, withExport) })
	}
}

func benchmarkDestroyEvents(b *testing.B, conns []store.Conn, withExport bool) {
	r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	round := func() {
		for i := 0; i < len(conns); i += eventsPerRead {
			r.queueEvents(conns[i:min(len(conns), i+eventsPerRead)])
		}
		r.applyEvents(ctx)
		if !withExport {
			b.StopTimer()
		}
		now = now.Add(5 * time.Second)
		r.export(ctx, now)
		now = now.Add(5 * time.Second)
		r.store.BeginPoll(now) // an empty dump: the ended connections leave the store
		r.store.EndPoll()
		b.StartTimer()
	}
	round()
	b.ReportAllocs()
	for b.Loop() {
		round()
	}
	if r.store.Len() != 0 {
		b.Fatalf("%d connections left in the store", r.store.Len())
	}
	perEvent := float64(b.Elapsed().Nanoseconds()) / float64(b.N*len(conns))
	b.ReportMetric(perEvent, "ns/event")
	b.ReportMetric(perEvent*10_000/1e7, "cpu-%/core@10k/s")
}
