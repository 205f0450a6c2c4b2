package ipfixexporter

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	id := component.NewID(metadata.Type)
	if name != "" {
		id = component.NewIDWithName(metadata.Type, name)
	}
	sub, err := cm.Sub(id.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, confmap.Validate(cfg)
}

func TestConfigValid(t *testing.T) {
	cfg, err := loadConfig(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Transport != TransportTCP || cfg.RecordLayout != "aggregate" || !cfg.IncludeK8sNames || cfg.IncludeK8sUIDs ||
		cfg.Format != FormatIPFIX || cfg.messageSize() != 65535 || cfg.ObservationDomainID != nil {
		t.Errorf("defaults not applied: %+v", cfg)
	}

	cfg, err = loadConfig(t, "udp_agent")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.messageSize() != 512 || cfg.TemplateRefreshInterval != time.Minute {
		t.Errorf("udp agent: message size %d (want 512), refresh %s", cfg.messageSize(), cfg.TemplateRefreshInterval)
	}

	cfg, err = loadConfig(t, "tls_proxy")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ObservationDomainID == nil || *cfg.ObservationDomainID != 42 || cfg.TLS.MinVersion != "1.3" || !cfg.IncludeK8sUIDs {
		t.Errorf("tls proxy: %+v", cfg)
	}

	if _, err = loadConfig(t, "json"); err != nil {
		t.Fatal(err)
	}
}

func TestConfigInvalid(t *testing.T) {
	for name, want := range map[string]string{
		"no_endpoint":   `"endpoint" is required`,
		"bad_transport": `"transport" "sctp" is not one of tcp, udp, tls`,
		"bad_layout":    `"record_layout" "flows" is not one of aggregate, proxy, agent`,
		"agent_uids":    `the agent layout's 43 IEs are fixed`,
		"udp_too_small": `the aggregate layout's template message is 536 bytes; "max_message_size" 512 is too small`,
		"tls_on_tcp":    `"tls" settings are only used with "transport: tls"`,
		"bad_uuid":      `"cluster_uuid": not a UUID`,
		"huge_message":  `"max_message_size" 70000 is not in 512-65535`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want one containing %q", err, want)
			}
		})
	}
}

func TestObservationDomainIsFNV1OfClusterUUIDBytes(t *testing.T) {
	// FNV-1 (not 1a) 32-bit over the 16 raw bytes, computed by hand here.
	u, _ := parseClusterUUID(testClusterUUID)
	h := uint32(2166136261)
	for _, b := range u {
		h *= 16777619
		h ^= uint32(b)
	}
	if got := observationDomain(testClusterUUID); got != h {
		t.Fatalf("observation domain %d, want %d", got, h)
	}
	if observationDomain("") != 0 {
		t.Fatal("no cluster UUID must give domain 0")
	}
}
