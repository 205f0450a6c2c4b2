//go:build integration

package conntrackreceiver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ti-mo/conntrack"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/ctsource"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/store"
)

// TestEventsReportConnectionsBetweenPolls: a UDP exchange whose conntrack
// entry is destroyed between two polls is only reported with events: true,
// with the final counters the DESTROY event carries.
func TestEventsReportConnectionsBetweenPolls(t *testing.T) {
	for _, events := range []bool{true, false} {
		l := newLab(t)
		l.kubeProxy()
		srv := l.listenUDP(l.srv, hostPort(srvV4, "5353"))
		t.Cleanup(func() { srv.Close() })
		cfg := testConfig(l.path(l.node))
		cfg.PollInterval = 3 * time.Second
		cfg.Events = events
		h := startReceiver(t, cfg)
		time.Sleep(500 * time.Millisecond) // the first poll, at start, is done

		c := l.dialUDP(l.cli, hostPort(clusterIPV4, "53"))
		client := addrPort(t, c.LocalAddr())
		for range 3 {
			if _, err := c.Write(make([]byte, 50)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		if n := deleteEntries(t, l.path(l.node), func(f *conntrack.Flow) bool {
			return f.TupleOrig.Proto.SourcePort == client.Port()
		}); n != 1 {
			t.Fatalf("deleted %d entries, want 1", n)
		}
		if !events {
			time.Sleep(2 * cfg.PollInterval)
			for _, r := range h.records() {
				if fromPort(client)(&r) {
					t.Fatalf("without events a connection no poll saw was reported")
				}
			}
			continue
		}
		rs := h.waitFor("the short connection", fromPort(client), func(rs []flowrecord.Record) bool { return len(rs) > 0 })
		r := rs[0]
		if len(rs) != 1 || r.EndReason != flowrecord.EndReasonEndOfFlow || r.Stats.PacketTotal != 3 || r.Stats.OctetTotal != 3*(50+28) ||
			r.Stats.PacketDelta != 3 || r.OriginalDestinationPort != 53 || r.Destination.Port != 5353 || r.ProxySNATPort == 0 {
			t.Fatalf("want one end-of-flow record with the final counters (3 packets, %d bytes):\n%s", 3*(50+28), describe(rs))
		}
		if h.counter("otelcol_receiver_conntrack_events", "applied") == 0 {
			t.Fatal("applied events not counted")
		}
		h.stop()
	}
}

// TestEventQueueIsBoundedAndCountsWhatItSheds: DESTROY events over
// max_queued_events are shed and counted; the poll loop is woken to drain the
// queue once it holds evWakeAt events (here half the bound), whether the
// events come one per read or many.
func TestEventQueueIsBoundedAndCountsWhatItSheds(t *testing.T) {
	f := conntrack.NewFlow(6, 0, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1000, 80, 0, 0)
	conns := make([]store.Conn, 15)
	for i := range conns {
		f.TupleOrig.Proto.SourcePort = uint16(1000 + i)
		ctsource.Convert(&f, &conns[i])
	}
	for _, perRead := range []int{1, 3, 15} {
		tel := componenttest.NewTelemetry()
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		set := receivertest.NewNopSettings(metadata.Type)
		set.TelemetrySettings = tel.NewTelemetrySettings()
		cfg := createDefaultConfig()
		cfg.MaxQueuedEvents = 10
		r, err := newReceiver(set, cfg, consumertest.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(conns); i += perRead {
			r.queueEvents(conns[i:min(len(conns), i+perRead)])
			if woken := len(r.evWake) == 1; woken != (i+perRead >= 5) {
				t.Fatalf("%d per read: after %d events woken=%v; want the poll loop woken at half the bound", perRead, i+perRead, woken)
			}
		}
		h := &harness{t: t, tel: tel}
		if len(r.evPending) != 10 || h.counter("otelcol_receiver_conntrack_events", "queue_full") != 5 {
			t.Fatalf("%d per read: queued %d, queue_full %d: want 10 queued and 5 shed", perRead, len(r.evPending), h.counter("otelcol_receiver_conntrack_events", "queue_full"))
		}
		for i, e := range r.evPending {
			if e.conn.SrcPort != uint16(1000+i) {
				t.Fatalf("%d per read: queued event %d is port %d, want %d (the first ones are kept, in order)", perRead, i, e.conn.SrcPort, 1000+i)
			}
		}
	}
}
