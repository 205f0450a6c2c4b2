package k8sflowprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/flowtel/flowtel/processor/k8sflowprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	t.Setenv(NodeNameEnv, "env-node")
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	def := func(mut func(*Config)) *Config {
		c := createDefaultConfig().(*Config)
		mut(c)
		return c
	}
	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{"", def(func(c *Config) { c.NodeName = "node-a" }), ""},
		{"gateway", def(func(c *Config) {
			c.NodeName = "env-node"
			c.Pods, c.PodLabels, c.AuthType, c.KubeConfig = PodsAll, true, "kubeConfig", "/etc/flowtel/kubeconfig"
			c.WaitForSync, c.DeletedPodRetention = false, 2*time.Minute
		}), ""},
		{"named_cluster", def(func(c *Config) { c.NodeName, c.ClusterUID = "node-a", "3f8e2c1a-prod-eu-1" }), ""},
		{"slow_api", def(func(c *Config) { c.NodeName, c.WaitForSyncTimeout = "node-b", 3*time.Minute }), ""},
		{"no_node", nil, "node_name is required with pods: local"},
		{"bad_pods", nil, `pods: "some" is not "local" or "all"`},
		{"bad_auth", nil, `auth_type: "token" is not "serviceAccount" or "kubeConfig"`},
		{"kubeconfig_without_kubeConfig_auth", nil, "kubeconfig is only used with auth_type: kubeConfig"},
		{"bad_retention", nil, "deleted_pod_retention must be positive"},
		{"bad_timeout", nil, "wait_for_sync_timeout must be positive"},
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
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Setenv(NodeNameEnv, "from-env")
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, "from-env", cfg.NodeName)
	assert.Equal(t, PodsLocal, cfg.Pods)
	assert.False(t, cfg.PodLabels)
	assert.Equal(t, "serviceAccount", cfg.AuthType)
	assert.True(t, cfg.WaitForSync)
	assert.Equal(t, 5*time.Minute, cfg.DeletedPodRetention)
	require.NoError(t, confmap.Validate(cfg))

	t.Setenv(NodeNameEnv, "")
	require.ErrorContains(t, confmap.Validate(createDefaultConfig()), "node_name is required")
}
