//go:build integration

package conntrackreceiver

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/ti-mo/conntrack"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// TestLifecycle starts and stops the receiver with events on: Shutdown must
// stop every goroutine (the generated TestMain runs goleak). It also enables counters and
// timestamps in the namespace it reads.
func TestLifecycle(t *testing.T) {
	l := newLab(t)
	l.in(l.node, "sysctl", "-qw", "net.netfilter.nf_conntrack_acct=0", "net.netfilter.nf_conntrack_timestamp=0")
	cfg := testConfig(l.path(l.node))
	cfg.Events = true
	h := startReceiver(t, cfg)
	h.stop()
	for _, k := range []string{"nf_conntrack_acct", "nf_conntrack_timestamp"} {
		out, err := exec.Command("ip", "netns", "exec", l.node, "sysctl", "-n", "net.netfilter."+k).Output()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			t.Fatalf("%s = %q (%v) after Start, want 1", k, out, err)
		}
	}
	if h.counter("otelcol_receiver_conntrack_table_max", "") <= 0 {
		t.Fatal("nf_conntrack_max not reported")
	}
}

// TestShutdownFlushes: what the receiver holds but has not exported when it
// stops is exported by Shutdown, counted: the delta of a live connection
// since its last export and the queued end-of-flow record of a connection
// already gone. Events are off so that the gone connection's end-of-flow
// record waits in the queue for its expiry (a minute), as after a missed event.
func TestShutdownFlushes(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newSinkLab(t, f)
			l.listenUDP(l.srv, hostPort(f.srv, "5353"))
			cfg := testConfig(l.path(l.node))
			cfg.Events = false
			cfg.ActiveTimeout, cfg.IdleTimeout = time.Minute, time.Minute
			h := startReceiver(t, cfg)

			tcp := l.dialTCP(l.cli, hostPort(f.clusterIP, "80"))
			if _, err := tcp.Write(make([]byte, 1000)); err != nil {
				t.Fatal(err)
			}
			u := l.dialUDP(l.cli, hostPort(f.clusterIP, "53"))
			for range 3 {
				if _, err := u.Write(make([]byte, 50)); err != nil {
					t.Fatal(err)
				}
			}
			live, gone := addrPort(t, tcp.LocalAddr()), addrPort(t, u.LocalAddr())
			time.Sleep(time.Second) // polls saw both
			if n := deleteEntries(t, l.path(l.node), func(f *conntrack.Flow) bool {
				return f.TupleOrig.Proto.SourcePort == gone.Port()
			}); n != 1 {
				t.Fatalf("deleted %d entries, want 1", n)
			}
			time.Sleep(time.Second) // polls saw it gone: its end goes out at the poll that confirms it, or in the flush
			if rs := matching(h.records(), fromPort(live)); len(rs) != 0 {
				t.Fatalf("records of the live connection before shutdown (the timers are a minute):\n%s", describe(rs))
			}
			endedBefore := len(matching(h.records(), fromPort(gone)))
			h.stop()

			rs := h.waitFor("the live connection's delta", fromPort(live), func(rs []flowrecord.Record) bool { return len(rs) > 0 })
			if len(rs) != 1 || rs[0].EndReason != flowrecord.EndReasonActiveTimeout || rs[0].Stats.OctetDelta != rs[0].Stats.OctetTotal || rs[0].Stats.OctetTotal < 1000 {
				t.Fatalf("want one active record of the live connection with its deltas since the start:\n%s", describe(rs))
			}
			rs = h.waitFor("the gone connection's end of flow", fromPort(gone), func(rs []flowrecord.Record) bool { return len(rs) > 0 })
			if len(rs) != 1 || rs[0].EndReason != flowrecord.EndReasonEndOfFlow || rs[0].Stats.PacketTotal != 3 || rs[0].Stats.PacketDelta != 3 {
				t.Fatalf("want one end-of-flow record of the gone connection with its 3 packets:\n%s", describe(rs))
			}
			// The gone connection's end is counted as flushed only when no poll
			// exported it: a poll in flight when endedBefore was read, or the
			// last poll Shutdown runs before the flush, may still export it
			// (uncounted), so with endedBefore 0 either count is right; the
			// exactly-one record above is what must hold.
			n, e := h.counter("otelcol_receiver_conntrack_records_flushed", "live"), h.counter("otelcol_receiver_conntrack_records_flushed", "end_of_flow")
			if n != 1 || e > int64(1-endedBefore) {
				t.Fatalf("flushed counted live %d end_of_flow %d, want 1 and at most %d", n, e, 1-endedBefore)
			}
		})
	}
}

// TestRestartResumesFromStorage: a receiver stopped in the middle of a
// transfer and a second one started on the same file_storage directory report
// the connection's bytes exactly once: the deltas of both runs add up to the
// totals conntrack counted (without resuming, the second run's first delta
// repeats everything the first one exported).
func TestRestartResumesFromStorage(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newSinkLab(t, f)
			dir := t.TempDir()
			cfg := testConfig(l.path(l.node))
			cfg.Storage = &storageID

			h1 := startWithStorage(t, cfg, dir)
			c := l.dialTCP(l.cli, hostPort(f.clusterIP, "80"))
			client := addrPort(t, c.LocalAddr())
			write := func(n int) {
				if _, err := c.Write(make([]byte, n)); err != nil {
					t.Fatal(err)
				}
			}
			write(1000)
			h1.waitFor("a first record", fromPort(client), hasReason(flowrecord.EndReasonActiveTimeout))
			write(2000)
			time.Sleep(500 * time.Millisecond)
			h1.stop()
			first := h1.waitFor("the first run's records", fromPort(client), func([]flowrecord.Record) bool { return true })

			write(3000) // while no receiver runs
			h2 := startWithStorage(t, cfg, dir)
			deadline := time.Now().Add(5 * time.Second)
			for h2.counter("otelcol_receiver_conntrack_resume_connections", "resumed") == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond) // the first poll resumes
			}
			if n := h2.counter("otelcol_receiver_conntrack_resume_connections", "resumed"); n != 1 {
				t.Fatalf("resumed %d connections, want 1 (ended %d, storage errors %d)", n, h2.counter("otelcol_receiver_conntrack_resume_connections", "ended"), h2.counter("otelcol_receiver_conntrack_netlink_errors", "storage"))
			}
			h2.waitFor("a record of the second run", fromPort(client), hasReason(flowrecord.EndReasonActiveTimeout))
			c.Close()
			second := h2.waitFor("the end of flow", fromPort(client), hasReason(flowrecord.EndReasonEndOfFlow))
			all := append(first, second...)
			checkDeltas(t, all)
			if last := all[len(all)-1]; last.Stats.OctetTotal < 6000 || last.Stats.OctetTotal > 6000+f.maxTCPHd*last.Stats.PacketTotal {
				t.Fatalf("totals %d bytes over %d packets, want the 6000 bytes sent plus headers:\n%s", last.Stats.OctetTotal, last.Stats.PacketTotal, describe(all))
			}
		})
	}
}

var storageID = component.MustNewID("file_storage")

// startWithStorage starts a file_storage extension on dir (stopped when the
// test ends, after the receiver) and a receiver using it.
func startWithStorage(t *testing.T, cfg *Config, dir string) *harness {
	t.Helper()
	fact := filestorage.NewFactory()
	scfg := fact.CreateDefaultConfig().(*filestorage.Config)
	scfg.Directory = dir
	ext, err := fact.Create(context.Background(), extensiontest.NewNopSettings(fact.Type()), scfg)
	if err != nil {
		t.Fatal(err)
	}
	h := hostWith{storageID: ext}
	if err := ext.Start(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return startReceiverOn(t, cfg, h)
}

// hostWith is a component host offering the given extensions.
type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

// newSinkLab is a lab behind a ClusterIP whose TCP server reads every
// connection to its end.
func newSinkLab(t *testing.T, f family) *lab {
	l := newLab(t)
	l.kubeProxy()
	go discardAll(l.listenTCP(l.srv, hostPort(f.srv, "8080")))
	return l
}

// discardAll accepts connections and reads them to the end.
func discardAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}

// matching keeps the records match accepts.
func matching(rs []flowrecord.Record, match func(*flowrecord.Record) bool) []flowrecord.Record {
	var out []flowrecord.Record
	for i := range rs {
		if match(&rs[i]) {
			out = append(out, rs[i])
		}
	}
	return out
}

// TestRestartDoesNotReportClosedConnectionsAgain: connections that closed
// before a restart and are still in conntrack (TIME_WAIT, two minutes) had
// their end-of-flow record from the first run; the restarted receiver must
// not report them again as connections it never saw (each would then count
// twice in any sum), while the live connections go on from the saved totals
// and their deltas across both runs add up to what conntrack counted.
func TestRestartDoesNotReportClosedConnectionsAgain(t *testing.T) {
	const closed, live = 24, 2
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := newSinkLab(t, f)
			dir := t.TempDir()
			cfg := testConfig(l.path(l.node))
			cfg.Storage = &storageID

			h1 := startWithStorage(t, cfg, dir)
			var closedPorts []netip.AddrPort
			for range closed {
				c := l.dialTCP(l.cli, hostPort(f.clusterIP, "80"))
				closedPorts = append(closedPorts, addrPort(t, c.LocalAddr()))
				if _, err := c.Write(make([]byte, 700)); err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			var liveConns []net.Conn
			var livePorts []netip.AddrPort
			for range live {
				c := l.dialTCP(l.cli, hostPort(f.clusterIP, "80"))
				t.Cleanup(func() { c.Close() })
				liveConns = append(liveConns, c)
				livePorts = append(livePorts, addrPort(t, c.LocalAddr()))
			}
			write := func(n int) {
				for _, c := range liveConns {
					if _, err := c.Write(make([]byte, n)); err != nil {
						t.Fatal(err)
					}
				}
			}
			write(1000)
			for _, p := range closedPorts {
				h1.waitFor("the first run's end of flow", fromPort(p), hasReason(flowrecord.EndReasonEndOfFlow))
			}
			for _, p := range livePorts {
				h1.waitFor("a first record", fromPort(p), hasReason(flowrecord.EndReasonActiveTimeout))
			}
			write(2000)
			time.Sleep(300 * time.Millisecond)
			h1.stop()
			first := h1.records()

			h2 := startWithStorage(t, cfg, dir)
			write(3000)
			for _, p := range livePorts {
				h2.waitFor("a record of the second run", fromPort(p), hasReason(flowrecord.EndReasonActiveTimeout))
			}
			// Several polls and an active and idle timeout of the second run.
			time.Sleep(cfg.ActiveTimeout + cfg.IdleTimeout + 2*cfg.PollInterval)
			second := h2.records()
			for _, p := range closedPorts {
				if again := matching(second, fromPort(p)); len(again) > 0 {
					t.Fatalf("%v closed before the restart and was reported again by the second run:\n%s\nfirst run:\n%s",
						p, describe(again), describe(matching(first, fromPort(p))))
				}
			}
			if n := h2.counter("otelcol_receiver_conntrack_resume_connections", "closed"); n != closed {
				t.Fatalf("resumed %d closed connections, want %d (resumed %d, ended %d)", n, closed,
					h2.counter("otelcol_receiver_conntrack_resume_connections", "resumed"), h2.counter("otelcol_receiver_conntrack_resume_connections", "ended"))
			}
			for _, c := range liveConns {
				c.Close()
			}
			for _, p := range livePorts {
				ends := h2.waitFor("the end of flow", fromPort(p), hasReason(flowrecord.EndReasonEndOfFlow))
				all := append(matching(first, fromPort(p)), ends...)
				checkDeltas(t, all)
				if last := all[len(all)-1]; last.Stats.OctetTotal < 6000 || last.Stats.OctetTotal > 6000+f.maxTCPHd*last.Stats.PacketTotal {
					t.Fatalf("totals %d bytes over %d packets, want the 6000 bytes sent plus headers:\n%s", last.Stats.OctetTotal, last.Stats.PacketTotal, describe(all))
				}
			}
		})
	}
}
