package flowstreamexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/flowtel/flowtel/exporter/flowstreamexporter/internal/metadata"
	"github.com/flowtel/flowtel/internal/k8sclient"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	withCert := func(mut func(*Config)) *Config {
		c := createDefaultConfig().(*Config)
		tc := configtls.NewDefaultServerConfig()
		tc.CertFile, tc.KeyFile = "/etc/flowtel/tls/tls.crt", "/etc/flowtel/tls/tls.key"
		c.TLS = configoptional.Some(tc)
		if mut != nil {
			mut(c)
		}
		return c
	}
	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{"", withCert(nil), ""},
		{"tuned", withCert(func(c *Config) {
			c.NetAddr.Endpoint = "0.0.0.0:15000"
			c.MaxConcurrentStreams = 300
			c.BufferSize = 100000
			c.Kubernetes = AuthConfig{Auth: k8sclient.Auth{AuthType: "kubeConfig", KubeConfig: "/etc/flowtel/kubeconfig"}, APIGroup: "flows.example.com",
				DecisionTTL: 2 * time.Minute, RecheckInterval: 10 * time.Second, MaxConcurrentTokenReviews: 2}
			c.Limits = LimitsConfig{MaxStreams: 32, MaxStreamsPerClient: 4}
		}), ""},
		{"no_tls", nil, "tls: is required (got none)"},
		{"no_cert", nil, "tls.cert_file: is required"},
		{"client_ca", nil, `tls.client_ca_file: is not used (got "/etc/flowtel/ca.crt")`},
		{"bad_buffer", nil, "buffer_size: must be positive (got 0)"},
		{"bad_auth_type", nil, `kubernetes.auth_type: unknown (got "token")`},
		{"kubeconfig_in_cluster", nil, "kubernetes.kubeconfig: only used with auth_type: kubeConfig"},
		{"no_group", nil, "kubernetes.api_group: must not be empty"},
		{"bad_ttl", nil, "kubernetes.decision_ttl: must be positive (got 0s)"},
		{"history", withCert(func(c *Config) {
			c.History = HistoryConfig{Endpoint: "tcp://clickhouse.flowtel:9000", Username: "flowstream", Password: "hunter2",
				Database: "flowtel", Table: "flows", MaxRows: 5000, QueryTimeout: 30 * time.Second, DialTimeout: 3 * time.Second}
		}), ""},
		{"history_http", nil, `history.endpoint: scheme must be tcp:// or tls:// (got "http://clickhouse.flowtel:8123")`},
		{"history_bad_table", nil, `history.table: not a plain name (got "flows; DROP TABLE flows")`},
		{"history_no_rows", nil, "history.max_rows: must be positive (got 0)"},
		{"bad_limits", nil, "limits.max_streams_per_client: must be between 1 and limits.max_streams (got 8, max_streams 4)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, cfg)
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	c := createDefaultConfig().(*Config)
	require.Equal(t, ":14740", c.NetAddr.Endpoint)
	require.Equal(t, 8192, c.BufferSize)
	require.Equal(t, "observability.antrea.io", c.Kubernetes.APIGroup)
	require.Equal(t, 10*time.Minute, c.Kubernetes.DecisionTTL)
	require.Equal(t, time.Minute, c.Kubernetes.RecheckInterval)
	require.Equal(t, LimitsConfig{MaxStreams: 256, MaxStreamsPerClient: 64}, c.Limits)
}
