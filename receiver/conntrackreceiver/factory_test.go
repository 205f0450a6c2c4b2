package conntrackreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

// TestFactory: logs only (the generated tests check the type and the config
// struct).
func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.LogsStability() != metadata.LogsStability {
		t.Fatalf("stability %v", f.LogsStability())
	}
	cfg := f.CreateDefaultConfig()
	if _, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop()); err == nil {
		t.Fatal("metrics signal must not be supported")
	}
}

// testConfig is a fast configuration for tests: a 200 ms poll (below the
// 1 s Validate floor, which only user configurations go through).
func testConfig(netns string) *Config {
	cfg := createDefaultConfig()
	cfg.NetNS = netns
	cfg.PollInterval = 200 * time.Millisecond
	cfg.ActiveTimeout = time.Second
	cfg.IdleTimeout = 2 * time.Second
	cfg.NodeName = "node-a"
	return cfg
}

// TestStartFailsWithClearErrors: a netns that is missing or not a network
// namespace fails Start with an error that says so and how to fix it (no
// privileges needed: the path is checked before any netlink socket opens).
func TestStartFailsWithClearErrors(t *testing.T) {
	for _, tc := range []struct{ netns, want string }{
		{"/var/run/netns/flowtel-does-not-exist", `netns: cannot open it: no such file or directory (got "/var/run/netns/flowtel-does-not-exist"); create it with ` + "`ip netns add`" + `, or point netns at /proc/<pid>/ns/net of a process in the namespace`},
		{"/etc/hostname", `netns: not a network namespace file (got "/etc/hostname"); use a path such as /var/run/netns/<name> or /proc/<pid>/ns/net`},
	} {
		cfg := testConfig(tc.netns)
		set := receivertestSettings(t)
		_, err := NewFactory().CreateLogs(t.Context(), set, cfg, nil)
		require.Error(t, err, "nil consumer accepted")
		rcv, err := NewFactory().CreateLogs(t.Context(), set, cfg, new(sinkNop))
		require.NoError(t, err)
		require.EqualError(t, rcv.Start(t.Context(), nil), tc.want)
		require.NoError(t, rcv.Shutdown(t.Context()))
	}
}

type sinkNop struct{}

func (sinkNop) Capabilities() consumer.Capabilities          { return consumer.Capabilities{} }
func (sinkNop) ConsumeLogs(context.Context, plog.Logs) error { return nil }

func receivertestSettings(*testing.T) receiver.Settings {
	return receivertest.NewNopSettings(metadata.Type)
}
