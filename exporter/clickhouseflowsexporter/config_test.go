package clickhouseflowsexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/configtest"
)

// TestLoadConfig: every instance of testdata/config.yaml, loaded over the
// defaults as the collector loads it, is the whole struct expected, or fails
// validation with the errors expected.
func TestLoadConfig(t *testing.T) {
	f := NewFactory()
	configtest.LoadConfig(t, f, []configtest.Case{
		{Name: "", Want: configtest.Defaults(f, func(c *Config) { c.Endpoint = "tcp://clickhouse:9000" })},
		{Name: "theia", Want: configtest.Defaults(f, func(c *Config) {
			c.Endpoint, c.Username, c.Password = "tls://clickhouse.flow-visibility.svc:9440", "clickhouse_operator", "clickhouse_operator_password"
			c.Database, c.Table, c.CreateSchema, c.TheiaViews, c.TTL = "flowdb", "flows_local", false, false, 12*time.Hour
			c.ClusterUUID, c.Compression, c.DialTimeout = "5a2c1d3e-0000-4000-8000-000000000001", "zstd", 3*time.Second
			c.TimeoutConfig.Timeout = 10 * time.Second
			c.TLS.CAFile = "/etc/flowtel/clickhouse/ca.crt"
			q := c.QueueConfig.Get()
			q.QueueSize = 200000
			b := q.Batch.Get()
			b.FlushTimeout, b.MinSize, b.MaxSize = 2*time.Second, 5000, 50000
			c.RetryConfig.MaxElapsedTime = 10 * time.Minute
		})},
		{Name: "cluster", Want: configtest.Defaults(f, func(c *Config) {
			c.Endpoint, c.Database, c.Cluster = "tcp://clickhouse:9000", "flowdb", "flows-cluster.v1"
		})},
		{Name: "badcluster", WantErr: []string{
			`cluster: not a cluster name (got "flows'; DROP"); use the name of a cluster in the servers' remote_servers: letters, digits, _, - and ., not starting with a digit`,
			`table: with cluster, name the Distributed table, not the local one (got "flows_local"); set table: flows, and the exporter uses flows_local on each server`,
		}},
		{Name: "http", WantErr: []string{`endpoint: the HTTP interface is not supported (got "http://clickhouse:8123"); use the native protocol, tcp://host:9000 or tls://host:9440`}},
		{Name: "badscheme", WantErr: []string{`endpoint: scheme must be tcp:// or tls:// (got "clickhouse:9000"); set tcp://host:9000 or tls://host:9440`}},
		{Name: "noendpoint", WantErr: []string{`endpoint: required (got ""); set tcp://host:9000 or tls://host:9440`}},
		{Name: "nohost", WantErr: []string{`endpoint: no host (got "tcp://:9000"); set tcp://host:9000 or tls://host:9440`}},
		{Name: "userinfo", WantErr: []string{`endpoint: must be scheme://host:port only (got "tcp://user:pw@clickhouse:9000/db"); set username, password and database separately`}},
		{Name: "badnames", WantErr: []string{
			`database: not a plain identifier (got "flows; DROP TABLE x"); use letters, digits and _, not starting with a digit`,
			`table: not a plain identifier (got "my-flows")`,
		}},
		{Name: "badttl", WantErr: []string{
			"ttl: below ClickHouse's one-second resolution (got 500ms); set 0 for no TTL, or at least 1s",
			`compression: unknown (got "gzip"); use lz4, zstd or none`,
		}},
		{Name: "negative", WantErr: []string{
			"ttl: must not be negative (got -1h0m0s); set 0 for no TTL, or a duration such as 72h",
			"dial_timeout: must be positive (got 0s); set a duration such as 10s",
		}},
	})
}

// endpoint() gives the address to dial and whether it is TLS, with the
// native protocol's default ports.
func TestEndpoint(t *testing.T) {
	for endpoint, want := range map[string]struct {
		addr   string
		secure bool
	}{
		"tcp://clickhouse:9000":                     {"clickhouse:9000", false},
		"tcp://clickhouse":                          {"clickhouse:9000", false},
		"tls://clickhouse.flow-visibility.svc:9440": {"clickhouse.flow-visibility.svc:9440", true},
		"tls://[fd00::1]":                           {"[fd00::1]:9440", true},
	} {
		addr, secure, err := (&Config{Endpoint: endpoint}).endpoint()
		require.NoError(t, err, endpoint)
		assert.Equal(t, want.addr, addr, endpoint)
		assert.Equal(t, want.secure, secure, endpoint)
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
