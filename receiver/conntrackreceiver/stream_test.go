//go:build integration

package conntrackreceiver

import (
	"context"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ti-mo/conntrack"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

const streamEntries = 30_000

// TestDumpStreams: a dump of a real table hands every entry over once, while
// the dump is still being read: the live heap never holds the table (the
// library's Dump held every entry at once).
func TestDumpStreams(t *testing.T) {
	ns, err := ctsource.OpenNamespace(benchTableOf(t, streamEntries))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	src, err := ctsource.Dial(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	liveHeap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	seen := make(map[store.Key]int, streamEntries)
	base := liveHeap()
	var peak uint64
	n, err := src.DumpZone(0, func(c *store.Conn) {
		seen[c.Key]++
		if len(seen)%5000 == 0 {
			peak = max(peak, liveHeap())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != streamEntries || len(seen) != streamEntries {
		t.Fatalf("dump handed over %d entries, %d distinct, want %d", n, len(seen), streamEntries)
	}
	for k, times := range seen {
		if times != 1 {
			t.Fatalf("%v handed over %d times", k, times)
		}
	}
	// What the test's own map holds is in the growth; the flows are not.
	mapBytes := uint64(len(seen)) * uint64(unsafe.Sizeof(store.Key{})+8) * 2
	held := uint64(streamEntries) * uint64(unsafe.Sizeof(conntrack.Flow{}))
	growth := peak - min(peak, base)
	t.Logf("live heap growth during the dump %d KB (the map %d KB, the whole dump %d KB)", growth>>10, mapBytes>>10, held>>10)
	if growth > mapBytes+held/4 {
		t.Fatalf("live heap grew %d KB during the dump (the map %d KB; the whole dump would be %d KB)", growth>>10, mapBytes>>10, held>>10)
	}
}

// TestShedOncePerConnectionAcrossPolls: with a table over max_connections,
// the store never holds more than the bound, and the connections left out
// are counted once, not at every poll.
func TestShedOncePerConnectionAcrossPolls(t *testing.T) {
	const maxConns = 10_000
	path := benchTableOf(t, streamEntries)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	cfg := createDefaultConfig()
	cfg.NetNS = path
	cfg.MaxConnections = maxConns
	r, err := newReceiver(set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if r.ns, err = ctsource.OpenNamespace(path); err != nil {
		t.Fatal(err)
	}
	defer r.ns.Close()
	defer func() {
		if r.src != nil {
			r.src.Close()
		}
	}()
	now := time.Now()
	for poll := 1; poll <= 3; poll++ {
		now = now.Add(cfg.PollInterval)
		if err := r.dump(now); err != nil {
			t.Fatal(err)
		}
		if r.store.Len() > maxConns {
			t.Fatalf("poll %d: store holds %d, over max_connections %d", poll, r.store.Len(), maxConns)
		}
		if r.pollShed != streamEntries-maxConns {
			t.Fatalf("poll %d: %d shed, want %d", poll, r.pollShed, streamEntries-maxConns)
		}
		m, err := tel.GetMetric("otelcol_receiver_conntrack_connections_shed")
		if err != nil {
			t.Fatal(err)
		}
		if v := m.Data.(metricdata.Sum[int64]).DataPoints[0].Value; v != streamEntries-maxConns {
			t.Fatalf("poll %d: connections_shed %d, want %d (each once)", poll, v, streamEntries-maxConns)
		}
	}
}

// TestPollOverrunCountedAndLogged: a poll longer than poll_interval is
// counted, and logged at most once a minute with how many overran.
func TestPollOverrunCountedAndLogged(t *testing.T) {
	path := benchTableOf(t, 1000)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	core, logs := observer.New(zap.WarnLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.NetNS = path
	r, err := newReceiver(set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if r.ns, err = ctsource.OpenNamespace(path); err != nil {
		t.Fatal(err)
	}
	defer r.ns.Close()
	defer func() {
		if r.src != nil {
			r.src.Close()
		}
	}()
	overruns := func() int64 {
		m, err := tel.GetMetric("otelcol_receiver_conntrack_polls_overrun")
		if err != nil {
			return 0
		}
		return m.Data.(metricdata.Sum[int64]).DataPoints[0].Value
	}
	ctx := context.Background()
	r.pollOnce(ctx) // within poll_interval
	if n := overruns(); n != 0 {
		t.Fatalf("polls_overrun %d after a poll within poll_interval", n)
	}
	cfg.PollInterval = time.Nanosecond // every poll overruns
	for range 3 {
		r.pollOnce(ctx)
	}
	if n := overruns(); n != 3 {
		t.Fatalf("polls_overrun %d, want 3", n)
	}
	warned := logs.FilterMessageSnippet("longer than poll_interval").All()
	if len(warned) != 1 || warned[0].ContextMap()["entries"] != int64(1000) || warned[0].ContextMap()["overruns_since_last_log"] != int64(1) {
		t.Fatalf("want one warning for the first overrun, with the entries: %+v", warned)
	}
}
