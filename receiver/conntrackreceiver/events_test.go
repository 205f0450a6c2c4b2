package conntrackreceiver

import (
	"testing"
	"time"

	"github.com/ti-mo/conntrack"

	"github.com/flowtel/flowtel/internal/flowrecord"
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
		if h.counter("flowtel.conntrack.events", "applied") == 0 {
			t.Fatal("applied events not counted")
		}
		h.stop()
	}
}
