package conntrackreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/flowtel/flowtel/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	t.Setenv(nodeNameEnv, "from-env")
	defaults := func(mut func(*Config)) *Config {
		c := &Config{PollInterval: 5 * time.Second, ActiveTimeout: 5 * time.Second, IdleTimeout: 15 * time.Second,
			Profile: "generic", Events: true, EnableAccounting: true, SysctlPath: "/proc/sys/net", MaxQueuedEvents: 100_000, MaxConnections: 1_000_000, NodeName: "from-env",
			Denied: configoptional.Default(defaultDeniedConfig()), Encoding: "attributes"}
		mut(c)
		return c
	}
	storage := component.MustNewIDWithName("file_storage", "conntrack")
	configtest.LoadConfig(t, NewFactory(), []configtest.Case{
		{Name: "", Want: defaults(func(*Config) {})},
		{Name: "antrea", Want: &Config{PollInterval: 10 * time.Second, ActiveTimeout: 30 * time.Second, IdleTimeout: time.Minute,
			Protocols: []string{"tcp", "udp"}, Profile: "antrea", NetNS: "/var/run/netns/node-1", Events: true,
			EnableAccounting: true, SysctlPath: "/proc/sys/net", MaxQueuedEvents: 100_000, MaxConnections: 50000, Storage: &storage, NodeName: "node-1",
			Denied: configoptional.Default(defaultDeniedConfig()), Encoding: "attributes"}},
		{Name: "compact", Want: defaults(func(c *Config) { c.Encoding = "compact" })},
		{Name: "bad_encoding", Err: `encoding: unknown (got "protobuf"); set attributes (the public schema, default) or compact (only when the records go to flowtel's k8s_flow alone)`},
		// protocols: [] means none: empty, not nil (unset, all protocols).
		{Name: "none", Want: defaults(func(c *Config) { c.Protocols = []string{} })},
		{Name: "zones", Want: defaults(func(c *Config) { c.Zones, c.StaleTimeout = []uint16{0, 7}, time.Minute })},
		{Name: "raised", Want: defaults(func(c *Config) {
			c.PollInterval, c.ActiveTimeout, c.IdleTimeout = 10*time.Second, 2*time.Second, 3*time.Second
		})},
		// events: false needs no event queue.
		{Name: "no_events", Want: defaults(func(c *Config) { c.Events, c.MaxQueuedEvents = false, 0 })},
		// The sysctls left as they are, read and written under a host mount.
		{Name: "no_accounting", Want: defaults(func(c *Config) {
			c.EnableAccounting, c.SysctlPath = false, "/host/proc/sys/net"
		})},
		// denied: present with no keys takes every default (group 100, the
		// receiver's own timeouts).
		{Name: "denied", Want: defaults(func(c *Config) {
			c.Denied = configoptional.Some(DeniedConfig{NFLOGGroup: 100, MaxRecords: 10_000, MaxRate: 1000})
		})},
		// Keys left out keep their defaults (active_timeout: the receiver's); max_rate: 0 is no bound.
		{Name: "denied_set", Want: defaults(func(c *Config) {
			c.NetNS = "/var/run/netns/node-1"
			c.Denied = configoptional.Some(DeniedConfig{NFLOGGroup: 7, IdleTimeout: 5 * time.Second, MaxRecords: 500})
		})},

		{Name: "bad_protocol", Err: `protocols: not a protocol this receiver filters on (got "icmp"); list only tcp, udp or sctp, or leave protocols unset for all`},
		{Name: "bad_profile", Err: `profile: unknown (got "calico"); set generic (zone 0, any CNI) or antrea`},
		{Name: "bad_poll", Err: "poll_interval: too short (got 100ms); set it to 1s or more"},
		{Name: "bad_active", Err: "active_timeout: must be positive (got 0s); set a duration such as 5s"},
		{Name: "bad_idle", Err: "idle_timeout: must be positive (got -1s); set a duration such as 15s"},
		{Name: "bad_stale", Err: "stale_timeout: must not be negative (got -1s); leave it unset or 0 for the default (5m0s, or twice the longer of active_timeout and idle_timeout)"},
		{Name: "antrea_zone0", Err: "zones: the antrea profile reads zone 0 for correlation on its own (got [0 65520]); list only the CNI zones, or leave zones unset for 65520 and 65510"},
		{Name: "bad_netns", Err: `netns: must be an absolute path (got "var/run/netns/x"); use a path such as /var/run/netns/<name> or /proc/<pid>/ns/net, or leave it empty for the collector's own namespace`},
		{Name: "bad_sysctl_path", Err: `sysctl_path: must be an absolute path (got "host/proc/sys/net"); use the directory holding netfilter/nf_conntrack_acct, such as /proc/sys/net or a writable mount of the host's /proc/sys/net`},
		{Name: "bad_max", Err: "max_connections: must not be negative (got -1); set a bound such as 1000000, or 0 for no bound"},
		{Name: "bad_denied", Err: "denied.idle_timeout: too short (got 500ms); set it to 1s or more, or leave it unset for the receiver's idle_timeout\n" +
			"denied.active_timeout: too short (got -1s); set it to 1s or more, or leave it unset for the receiver's active_timeout\n" +
			"denied.max_records: must not be negative (got -1); set a bound such as 10000, or 0 for no bound\n" +
			"denied.max_rate: must not be negative (got -5); set packets per second such as 1000, or 0 for no bound"},
		{Name: "bad_queue", Err: "max_queued_events: must be positive when events are on (got 0); set a bound such as 100000, or events: false"},
	})
}

func TestTimeouts(t *testing.T) {
	for _, tt := range []struct {
		name                string
		mut                 func(*Config)
		active, idle, stale time.Duration
	}{
		{"defaults", func(*Config) {}, 5 * time.Second, 15 * time.Second, 5 * time.Minute},
		{"stale set", func(c *Config) { c.StaleTimeout = time.Minute }, 5 * time.Second, 15 * time.Second, time.Minute},
		{"raised to the poll interval", func(c *Config) {
			c.PollInterval, c.ActiveTimeout, c.IdleTimeout = 10*time.Second, 2*time.Second, 3*time.Second
		}, 10 * time.Second, 10 * time.Second, 5 * time.Minute},
		{"stale 2 × max(active, idle) above 5m", func(c *Config) {
			c.ActiveTimeout, c.IdleTimeout = 10*time.Minute, 7*time.Minute
		}, 10 * time.Minute, 7 * time.Minute, 20 * time.Minute},
	} {
		cfg := createDefaultConfig()
		tt.mut(cfg)
		a, i, s := cfg.timeouts()
		require.Equal(t, []time.Duration{tt.active, tt.idle, tt.stale}, []time.Duration{a, i, s}, tt.name)
	}
}

func TestProtocolNumbers(t *testing.T) {
	for _, tt := range []struct {
		protocols []string
		want      []uint8
	}{
		{[]string{"tcp", "UDP "}, []uint8{6, 17}},
		{[]string{}, []uint8{}}, // none
		{nil, nil},              // all
	} {
		cfg := createDefaultConfig()
		cfg.Protocols = tt.protocols
		p, err := cfg.protocolNumbers()
		require.NoError(t, err)
		require.Equal(t, tt.want, p, "protocols %#v", tt.protocols)
	}
}

// TestDeniedTimeouts: unset, the denied path runs on the receiver's own
// timers, so that a denied connection's first record leaves when the
// conntrack half of the same connection does on the source Node (the
// gateway pairs an ingress Drop with it); set, its own; never under 1 s.
func TestDeniedTimeouts(t *testing.T) {
	for _, c := range []struct {
		name                         string
		activeSet, idleSet           time.Duration
		receiverActive, receiverIdle time.Duration
		wantActive, wantIdle         time.Duration
	}{
		{name: "inherited", receiverActive: 2 * time.Second, receiverIdle: 3 * time.Second, wantActive: 2 * time.Second, wantIdle: 3 * time.Second},
		{name: "own", activeSet: time.Minute, idleSet: 15 * time.Second, receiverActive: 2 * time.Second, receiverIdle: 3 * time.Second,
			wantActive: time.Minute, wantIdle: 15 * time.Second},
		{name: "floored", receiverActive: 200 * time.Millisecond, receiverIdle: 300 * time.Millisecond, wantActive: time.Second, wantIdle: time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			cfg.ActiveTimeout, cfg.IdleTimeout = c.receiverActive, c.receiverIdle
			cfg.Denied = configoptional.Some(DeniedConfig{ActiveTimeout: c.activeSet, IdleTimeout: c.idleSet})
			active, idle := cfg.deniedTimeouts()
			require.Equal(t, c.wantActive, active)
			require.Equal(t, c.wantIdle, idle)
		})
	}
}
