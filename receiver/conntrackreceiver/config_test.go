package conntrackreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

// loadTestConfig unmarshals the named instance of testdata/config.yaml over
// the defaults.
func loadTestConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestLoadConfig(t *testing.T) {
	t.Setenv(nodeNameEnv, "from-env")
	storage := component.MustNewIDWithName("file_storage", "conntrack")
	tests := []struct {
		name string
		want *Config
	}{
		{"", &Config{PollInterval: 5 * time.Second, ActiveTimeout: 5 * time.Second, IdleTimeout: 15 * time.Second,
			Profile: "generic", Events: true, MaxQueuedEvents: 100_000, MaxConnections: 1_000_000, NodeName: "from-env"}},
		{"antrea", &Config{PollInterval: 10 * time.Second, ActiveTimeout: 30 * time.Second, IdleTimeout: time.Minute,
			Protocols: []string{"tcp", "udp"}, Profile: "antrea", NetNS: "/var/run/netns/node-1", Events: true,
			MaxQueuedEvents: 100_000, MaxConnections: 50000, Storage: &storage, NodeName: "node-1"}},
		{"none", &Config{PollInterval: 5 * time.Second, ActiveTimeout: 5 * time.Second, IdleTimeout: 15 * time.Second,
			Protocols: []string{}, Profile: "generic", Events: true, MaxQueuedEvents: 100_000, MaxConnections: 1_000_000, NodeName: "from-env"}},
		{"zones", &Config{PollInterval: 5 * time.Second, ActiveTimeout: 5 * time.Second, IdleTimeout: 15 * time.Second,
			StaleTimeout: time.Minute, Profile: "generic", Zones: []uint16{0, 7}, Events: true, MaxQueuedEvents: 100_000,
			MaxConnections: 1_000_000, NodeName: "from-env"}},
		{"raised", &Config{PollInterval: 10 * time.Second, ActiveTimeout: 2 * time.Second, IdleTimeout: 3 * time.Second,
			Profile: "generic", Events: true, MaxQueuedEvents: 100_000, MaxConnections: 1_000_000, NodeName: "from-env"}},
		// events: false needs no event queue.
		{"no_events", &Config{PollInterval: 5 * time.Second, ActiveTimeout: 5 * time.Second, IdleTimeout: 15 * time.Second,
			Profile: "generic", MaxConnections: 1_000_000, NodeName: "from-env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loadTestConfig(t, tt.name)
			require.NoError(t, confmap.Validate(cfg))
			require.Equal(t, tt.want, cfg)
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"bad_protocol", `protocols: not a protocol this receiver filters on (got "icmp"); list only tcp, udp or sctp, or leave protocols unset for all`},
		{"bad_profile", `profile: unknown (got "calico"); set generic (zone 0, any CNI) or antrea`},
		{"bad_poll", "poll_interval: too short (got 100ms); set it to 1s or more"},
		{"bad_active", "active_timeout: must be positive (got 0s); set a duration such as 5s"},
		{"bad_idle", "idle_timeout: must be positive (got -1s); set a duration such as 15s"},
		{"bad_stale", "stale_timeout: must not be negative (got -1s); leave it unset or 0 for the default (5m0s, or twice the longer of active_timeout and idle_timeout)"},
		{"antrea_zone0", "zones: the antrea profile reads zone 0 for correlation on its own (got [0 65520]); list only the CNI zones, or leave zones unset for 65520 and 65510"},
		{"bad_netns", `netns: must be an absolute path (got "var/run/netns/x"); use a path such as /var/run/netns/<name> or /proc/<pid>/ns/net, or leave it empty for the collector's own namespace`},
		{"bad_max", "max_connections: must not be negative (got -1); set a bound such as 1000000, or 0 for no bound"},
		{"bad_queue", "max_queued_events: must be positive when events are on (got 0); set a bound such as 100000, or events: false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.EqualError(t, confmap.Validate(loadTestConfig(t, tt.name)), tt.want)
		})
	}
}

func TestTimeouts(t *testing.T) {
	for _, tt := range []struct {
		name                string
		active, idle, stale time.Duration
	}{
		{"", 5 * time.Second, 15 * time.Second, 5 * time.Minute},
		{"zones", 5 * time.Second, 15 * time.Second, time.Minute},
		// Timeouts below the poll interval are raised to it.
		{"raised", 10 * time.Second, 10 * time.Second, 5 * time.Minute},
	} {
		a, i, s := loadTestConfig(t, tt.name).timeouts()
		require.Equal(t, []time.Duration{tt.active, tt.idle, tt.stale}, []time.Duration{a, i, s}, tt.name)
	}
	// Above 5m the stale timeout is 2 × max(active, idle).
	cfg := loadTestConfig(t, "raised")
	cfg.ActiveTimeout, cfg.IdleTimeout = 10*time.Minute, 7*time.Minute
	_, _, s := cfg.timeouts()
	require.Equal(t, 20*time.Minute, s)
}

func TestProtocolNumbers(t *testing.T) {
	p, err := loadTestConfig(t, "antrea").protocolNumbers()
	require.NoError(t, err)
	require.Equal(t, []uint8{6, 17}, p)
	// protocols: [] means none (empty, not nil); unset means all (nil).
	p, err = loadTestConfig(t, "none").protocolNumbers()
	require.NoError(t, err)
	require.NotNil(t, p)
	require.Empty(t, p)
	p, err = loadTestConfig(t, "").protocolNumbers()
	require.NoError(t, err)
	require.Nil(t, p)
}
