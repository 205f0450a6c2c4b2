package conntrackreceiver

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.Type() != metadata.Type || f.Type().String() != "conntrack" {
		t.Fatalf("type %v", f.Type())
	}
	if f.LogsStability() != metadata.LogsStability {
		t.Fatalf("stability %v", f.LogsStability())
	}
	cfg := f.CreateDefaultConfig()
	if err := componenttest.CheckConfigStruct(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop()); err == nil {
		t.Fatal("metrics signal must not be supported")
	}
}

// TestLifecycle starts and stops the receiver with events on: Shutdown must
// stop every goroutine (TestMain runs goleak). It also enables counters and
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
	if h.counter("flowtel.conntrack.table.max", "") <= 0 {
		t.Fatal("nf_conntrack_max not reported")
	}
}
