package conntrackreceiver

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig()
	if err := sub.Unmarshal(cfg); err != nil {
		return cfg, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestConfigDefaults(t *testing.T) {
	t.Setenv(nodeNameEnv, "from-env")
	cfg, err := loadConfig(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PollInterval != 5*time.Second || cfg.ActiveTimeout != 5*time.Second || cfg.IdleTimeout != 15*time.Second ||
		cfg.Profile != "generic" || cfg.Protocols != nil || !cfg.Events || cfg.MaxQueuedEvents != 100_000 || cfg.NetNS != "" || cfg.MaxConnections != 1_000_000 ||
		cfg.NodeName != "from-env" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if a, i, s := cfg.timeouts(); a != 5*time.Second || i != 15*time.Second || s != 5*time.Minute {
		t.Fatalf("timeouts %v %v %v", a, i, s)
	}
	if err := componenttest.CheckConfigStruct(cfg); err != nil {
		t.Fatal(err)
	}
}

func TestConfigNamedInstances(t *testing.T) {
	cfg, err := loadConfig(t, "antrea")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Profile != "antrea" || cfg.PollInterval != 10*time.Second || cfg.ActiveTimeout != 30*time.Second || cfg.IdleTimeout != time.Minute ||
		len(cfg.Protocols) != 2 || cfg.NetNS != "/var/run/netns/node-1" || !cfg.Events || cfg.MaxConnections != 50000 || cfg.NodeName != "node-1" {
		t.Fatalf("antrea: %+v", cfg)
	}
	if cfg.Storage == nil || cfg.Storage.String() != "file_storage/conntrack" {
		t.Fatalf("storage %v", cfg.Storage)
	}
	if p, _ := cfg.protocolNumbers(); len(p) != 2 || p[0] != 6 || p[1] != 17 {
		t.Fatalf("protocols %v", p)
	}

	if cfg, err = loadConfig(t, "no_events"); err != nil || cfg.Events {
		t.Fatalf("events: false needs no event queue: %v %+v", err, cfg)
	}

	cfg, err = loadConfig(t, "none")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := cfg.protocolNumbers(); p == nil || len(p) != 0 {
		t.Fatalf("protocols: [] must mean none (empty, not nil), got %#v", p)
	}

	cfg, err = loadConfig(t, "zones")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Zones) != 2 || cfg.Zones[1] != 7 {
		t.Fatalf("zones %v", cfg.Zones)
	}
	if _, _, s := cfg.timeouts(); s != time.Minute {
		t.Fatalf("stale %v", s)
	}

	cfg, err = loadConfig(t, "raised")
	if err != nil {
		t.Fatal(err)
	}
	if a, i, s := cfg.timeouts(); a != 10*time.Second || i != 10*time.Second || s != 5*time.Minute {
		t.Fatalf("timeouts below the poll interval must be raised to it: %v %v %v", a, i, s)
	}
	cfg.ActiveTimeout, cfg.IdleTimeout = 10*time.Minute, 7*time.Minute
	if _, _, s := cfg.timeouts(); s != 20*time.Minute {
		t.Fatalf("stale must be 2 × max(active, idle) above 5m, got %v", s)
	}
}

func TestConfigInvalid(t *testing.T) {
	for name, want := range map[string]string{
		"bad_protocol": `protocols: "icmp"`,
		"bad_profile":  `profile "calico" is unknown`,
		"bad_poll":     "poll_interval 100ms: must be at least 1s",
		"antrea_zone0": "zone 0",
		"bad_netns":    "netns \"var/run/netns/x\": must be an absolute path",
		"bad_max":      "max_connections -1",
		"bad_queue":    "max_queued_events 0: must be positive",
	} {
		_, err := loadConfig(t, name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, want)
		}
	}
}
