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
	node := func(name string) *Config {
		return &Config{NodeName: name, Pods: PodsLocal, AuthType: "serviceAccount", WaitForSync: true,
			WaitForSyncTimeout: time.Minute, DeletedPodRetention: 5 * time.Minute}
	}
	named, slow := node("node-a"), node("node-b")
	named.ClusterUID, slow.WaitForSyncTimeout = "3f8e2c1a-prod-eu-1", 3*time.Minute
	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{name: "", want: node("node-a")},
		{name: "gateway", want: &Config{NodeName: "env-node", Pods: PodsAll, PodLabels: true, AuthType: "kubeConfig",
			KubeConfig: "/etc/flowtel/kubeconfig", WaitForSyncTimeout: time.Minute, DeletedPodRetention: 2 * time.Minute}},
		{name: "named_cluster", want: named},
		{name: "slow_api", want: slow},
		{name: "no_node", wantErr: "node_name: required with pods: local (got none); set it, or the K8S_NODE_NAME environment variable, to the Node this collector runs on"},
		{name: "bad_pods", wantErr: `pods: unknown scope (got "some"); set local (this Node's Pods) or all (every Pod)`},
		{name: "bad_auth", wantErr: `auth_type: unknown (got "token"); set serviceAccount (in a Pod) or kubeConfig`},
		{name: "kubeconfig_without_kubeConfig_auth", wantErr: "kubeconfig: only used with auth_type: kubeConfig (got auth_type: serviceAccount); set auth_type: kubeConfig, or remove kubeconfig"},
		{name: "bad_retention", wantErr: "deleted_pod_retention: must be positive (got 0s); set a duration such as 5m0s"},
		{name: "bad_timeout", wantErr: "wait_for_sync_timeout: must be positive when wait_for_sync is true (got 0s); set a duration such as 1m, or wait_for_sync: false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, cfg)
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
	require.ErrorContains(t, confmap.Validate(createDefaultConfig()), "node_name: required")
}
