//go:build integration

package conntrackreceiver

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowtel/flowtel/internal/flowrecord"
)

// accountingOff turns conntrack accounting and timestamps off in the lab's
// Node, as a fresh network namespace (and a host's default) has them.
func (l *lab) accountingOff() {
	l.in(l.node, "sysctl", "-qw", "net.netfilter.nf_conntrack_acct=0", "net.netfilter.nf_conntrack_timestamp=0")
	l.both("-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW,ESTABLISHED,RELATED", "-j", "ACCEPT")
}

// sysctlOf reads a net.netfilter sysctl of the lab's Node.
func (l *lab) sysctlOf(name string) string {
	l.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", l.node, "sysctl", "-n", "net.netfilter."+name).Output()
	if err != nil {
		l.t.Fatalf("sysctl %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// openTCP opens a TCP connection through the Node's ClusterIP and sends
// over it; it returns the client's address and port.
func (l *lab) openTCP() netip.AddrPort {
	l.t.Helper()
	c := l.dialTCP(l.cli, clusterIPV4+":80")
	if _, err := c.Write(make([]byte, 500)); err != nil {
		l.t.Fatal(err)
	}
	return addrPort(l.t, c.LocalAddr())
}

// zeroPackets counts the records without counters.
func zeroPackets(rs []flowrecord.Record) int64 {
	var n int64
	for _, r := range rs {
		if r.Stats.PacketTotal == 0 {
			n++
		}
	}
	return n
}

// TestAccountingEnabledAndOlderConnectionsCounted: the receiver turns
// accounting and timestamps on in the namespace it reads and says so; a
// connection opened before has no counters (the kernel adds them to an entry
// when it creates it), and each of its records is counted by reason, while a
// connection opened after has its counters.
func TestAccountingEnabledAndOlderConnectionsCounted(t *testing.T) {
	l := newLab(t)
	l.kubeProxy()
	l.accountingOff()
	l.listenTCP(l.srv, srvV4+":8080")
	before := l.openTCP()

	core, logs := observer.New(zap.InfoLevel)
	h := startReceiverLogging(t, testConfig(l.path(l.node)), componenttest.NewNopHost(), zap.New(core))
	for _, k := range []string{"nf_conntrack_acct", "nf_conntrack_timestamp"} {
		if v := l.sysctlOf(k); v != "1" {
			t.Fatalf("%s = %s after Start, want 1", k, v)
		}
	}
	enabled := logs.FilterMessageSnippet("enabled conntrack accounting/timestamps").All()
	if len(enabled) != 1 || enabled[0].ContextMap()["enabled"] != "net.netfilter.nf_conntrack_acct,net.netfilter.nf_conntrack_timestamp" {
		t.Fatalf("want one log line naming both sysctls it enabled, got %v", logs.All())
	}
	after := l.openTCP()

	old := h.waitFor("the connection opened before Start", fromPort(before), func(rs []flowrecord.Record) bool { return len(rs) > 0 })
	if old[0].Stats.PacketTotal != 0 || old[0].Stats.OctetTotal != 0 {
		t.Fatalf("the connection opened before accounting has counters:\n%s", describe(old))
	}
	recent := h.waitFor("the connection opened after Start", fromPort(after), func(rs []flowrecord.Record) bool { return len(rs) > 0 })
	if recent[0].Stats.PacketTotal == 0 || recent[0].Stats.OctetTotal < 500 {
		t.Fatalf("the connection opened after accounting has no counters:\n%s", describe(recent))
	}
	h.stop()
	all := h.records()
	if got, want := h.counter("otelcol_receiver_conntrack_records_incomplete", "no_counters"), zeroPackets(all); got != want || want == 0 {
		t.Fatalf("records_incomplete{no_counters} = %d, want %d (the records without counters):\n%s", got, want, describe(all))
	}
	if got := h.counter("otelcol_receiver_conntrack_records_incomplete", "no_timestamps"); got < int64(len(old)) {
		t.Fatalf("records_incomplete{no_timestamps} = %d, want at least the %d records of the connection opened before", got, len(old))
	}
	if n := h.counter("otelcol_receiver_conntrack_netlink_errors", "sysctl"); n != 0 {
		t.Fatalf("netlink_errors{sysctl} = %d, want 0", n)
	}
}

// TestAccountingOptOut: enable_accounting: false leaves the sysctls off,
// warns once, and the records without counters are still counted.
func TestAccountingOptOut(t *testing.T) {
	l := newLab(t)
	l.kubeProxy()
	l.accountingOff()
	l.listenTCP(l.srv, srvV4+":8080")
	cfg := testConfig(l.path(l.node))
	cfg.EnableAccounting = false
	core, logs := observer.New(zap.WarnLevel)
	h := startReceiverLogging(t, cfg, componenttest.NewNopHost(), zap.New(core))
	if v := l.sysctlOf("nf_conntrack_acct"); v != "0" {
		t.Fatalf("nf_conntrack_acct = %s with enable_accounting: false, want it left at 0", v)
	}
	if n := logs.FilterMessageSnippet("enable_accounting is false").Len(); n != 1 {
		t.Fatalf("want one warning that accounting is off, got %v", logs.All())
	}
	c := l.openTCP()
	h.waitFor("the connection", fromPort(c), func(rs []flowrecord.Record) bool { return len(rs) > 0 })
	h.stop()
	if got, want := h.counter("otelcol_receiver_conntrack_records_incomplete", "no_counters"), int64(len(h.records())); got != want {
		t.Fatalf("records_incomplete{no_counters} = %d, want every record (%d)", got, want)
	}
}

// TestAccountingThroughSysctlMount: a container's /proc/sys is read-only, so
// the Pod mounts the host's /proc/sys/net elsewhere and sysctl_path names
// it. Through a writable mount the receiver turns accounting on in the
// namespace it reads; through a read-only one (a container's own /proc/sys)
// it says it could not, counts the failure, and runs.
func TestAccountingThroughSysctlMount(t *testing.T) {
	for _, ro := range []bool{false, true} {
		name := map[bool]string{false: "writable", true: "read-only"}[ro]
		t.Run(name, func(t *testing.T) {
			l := newLab(t)
			l.accountingOff()
			dir := t.TempDir()
			run(t, "mount", "--bind", "/proc/sys/net", dir)
			t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
			if ro {
				run(t, "mount", "-o", "remount,bind,ro", dir)
			}
			cfg := testConfig(l.path(l.node))
			cfg.SysctlPath = dir
			core, logs := observer.New(zap.WarnLevel)
			h := startReceiverLogging(t, cfg, componenttest.NewNopHost(), zap.New(core))
			want, errs := "1", int64(0)
			if ro {
				want, errs = "0", 1
			}
			for _, k := range []string{"nf_conntrack_acct", "nf_conntrack_timestamp"} {
				if v := l.sysctlOf(k); v != want {
					t.Fatalf("%s = %s after Start, want %s", k, v, want)
				}
			}
			if n := h.counter("otelcol_receiver_conntrack_netlink_errors", "sysctl"); n != errs {
				t.Fatalf("netlink_errors{sysctl} = %d, want %d", n, errs)
			}
			if warned := logs.FilterMessageSnippet("could not enable").All(); ro != (len(warned) == 1) ||
				(ro && !strings.Contains(warned[0].ContextMap()["error"].(string), dir+"/netfilter/nf_conntrack_acct")) {
				t.Fatalf("warnings %v; want one naming the path it could not write exactly when the mount is read-only", logs.All())
			}
			if h.counter("otelcol_receiver_conntrack_table_max", "") <= 0 {
				t.Fatal("nf_conntrack_max not read through sysctl_path")
			}
		})
	}
}
