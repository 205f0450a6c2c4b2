package clickhouseflowsexporter

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cfg
}

func TestConfigStruct(t *testing.T) {
	if err := componenttest.CheckConfigStruct(createDefaultConfig()); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConfig(t *testing.T) {
	def := loadConfig(t, "")
	if err := confmap.Validate(def); err != nil {
		t.Fatalf("default instance: %v", err)
	}
	if def.Endpoint != "tcp://clickhouse:9000" || def.Database != "default" || def.Table != "flows" ||
		!def.CreateSchema || def.Compression != "lz4" || def.TTL != 0 {
		t.Errorf("defaults not kept: %+v", def)
	}
	q := def.QueueConfig.Get()
	if q == nil || q.Batch.Get() == nil {
		t.Fatal("the default config must queue and batch")
	}
	if b := q.Batch.Get(); b.MinSize != defaultMinRows || b.FlushTimeout != time.Second || b.Sizer.String() != "items" {
		t.Errorf("default batch %+v", b)
	}

	th := loadConfig(t, "theia")
	if err := confmap.Validate(th); err != nil {
		t.Fatalf("theia instance: %v", err)
	}
	addr, secure, err := th.endpoint()
	if err != nil || addr != "clickhouse.flow-visibility.svc:9440" || !secure {
		t.Errorf("endpoint() = %q, %v, %v", addr, secure, err)
	}
	if th.Username != "clickhouse_operator" || string(th.Password) != "clickhouse_operator_password" ||
		th.Database != "flowdb" || th.Table != "flows_local" || th.CreateSchema || th.TTL != 12*time.Hour ||
		th.ClusterUUID != "5a2c1d3e-0000-4000-8000-000000000001" || th.Compression != "zstd" ||
		th.DialTimeout != 3*time.Second || th.TimeoutConfig.Timeout != 10*time.Second ||
		th.TLS.CAFile != "/etc/flowtel/clickhouse/ca.crt" || th.RetryConfig.MaxElapsedTime != 10*time.Minute {
		t.Errorf("theia instance not loaded: %+v", th)
	}
	if b := th.QueueConfig.Get().Batch.Get(); b.MinSize != 5000 || b.MaxSize != 50000 || b.FlushTimeout != 2*time.Second {
		t.Errorf("theia batch %+v", b)
	}
}

func TestInvalidConfigs(t *testing.T) {
	for name, wants := range map[string][]string{
		"http":       {"HTTP interface is not supported", "tcp://host:9000"},
		"badscheme":  {"scheme must be tcp:// or tls://"},
		"noendpoint": {"endpoint: required"},
		"badnames":   {`database "flows; DROP TABLE x"`, `table "my-flows"`},
		"badttl":     {"ttl 500ms", `compression "gzip"`},
		"userinfo":   {"must be scheme://host:port only"},
	} {
		t.Run(name, func(t *testing.T) {
			err := confmap.Validate(loadConfig(t, name))
			if err == nil {
				t.Fatal("valid, want an error")
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestCredentials(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	t.Setenv(envUsername, "")
	t.Setenv(envPassword, "")
	if u, p := cfg.credentials(); u != "default" || p != "" {
		t.Errorf("no config, no env: %q %q", u, p)
	}
	t.Setenv(envUsername, "env-user")
	t.Setenv(envPassword, "env-pw")
	if u, p := cfg.credentials(); u != "env-user" || p != "env-pw" {
		t.Errorf("env: %q %q", u, p)
	}
	cfg.Username, cfg.Password = "cfg-user", "cfg-pw"
	if u, p := cfg.credentials(); u != "cfg-user" || p != "cfg-pw" {
		t.Errorf("config wins: %q %q", u, p)
	}
}
