package k8sflowprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/flowtel/flowtel/internal/configtest"
	"github.com/flowtel/flowtel/internal/k8sclient"
	"github.com/flowtel/flowtel/internal/k8sindex"
)

func TestLoadConfig(t *testing.T) {
	t.Setenv(NodeNameEnv, "env-node")
	node := func(name string) *Config {
		return &Config{NodeName: name, Pods: PodsLocal,
			Settings:       k8sindex.Settings{Auth: k8sclient.Auth{AuthType: "serviceAccount"}, WaitForSync: true, WaitForSyncTimeout: time.Minute, DeletedPodRetention: 5 * time.Minute},
			HoldUnresolved: 5 * time.Second, HoldMaxRecords: 10000, NetworkPolicies: true, Encoding: EncodingAttributes}
	}
	named, slow, longHold, noHold, noPolicies, compact := node("node-a"), node("node-b"), node("node-a"), node("node-a"), node("node-a"), node("node-a")
	noPolicies.NetworkPolicies = false
	compact.Encoding = EncodingCompact
	named.ClusterUID, slow.WaitForSyncTimeout = "3f8e2c1a-prod-eu-1", 3*time.Minute
	longHold.HoldUnresolved, longHold.HoldMaxRecords = 10*time.Second, 500
	noHold.HoldUnresolved = 0
	configtest.LoadConfig(t, NewFactory(), []configtest.Case{
		{Name: "", Want: node("node-a")},
		{Name: "gateway", Want: &Config{NodeName: "env-node", Pods: PodsAll, PodLabels: true,
			Settings:       k8sindex.Settings{Auth: k8sclient.Auth{AuthType: "kubeConfig", KubeConfig: "/etc/flowtel/kubeconfig"}, WaitForSyncTimeout: time.Minute, DeletedPodRetention: 2 * time.Minute},
			HoldUnresolved: 5 * time.Second, HoldMaxRecords: 10000, NetworkPolicies: true, Encoding: EncodingAttributes}},
		{Name: "named_cluster", Want: named},
		{Name: "slow_api", Want: slow},
		{Name: "long_hold", Want: longHold},
		{Name: "no_hold", Want: noHold},
		{Name: "no_policies", Want: noPolicies},
		{Name: "compact", Want: compact},
		{Name: "no_node", Err: "node_name: required with pods: local (got none); set it, or the K8S_NODE_NAME environment variable, to the Node this collector runs on"},
		{Name: "bad_pods", Err: `pods: unknown scope (got "some"); set local (this Node's Pods) or all (every Pod)`},
		{Name: "bad_auth", Err: `auth_type: unknown (got "token"); set serviceAccount (in a Pod) or kubeConfig`},
		{Name: "kubeconfig_without_kubeConfig_auth", Err: "kubeconfig: only used with auth_type: kubeConfig (got auth_type: serviceAccount); set auth_type: kubeConfig, or remove kubeconfig"},
		{Name: "bad_retention", Err: "deleted_pod_retention: must be positive (got 0s); set a duration such as 5m0s"},
		{Name: "bad_hold", Err: "hold_unresolved: must not be negative (got -1s); set a duration such as 5s, or 0 to export unresolved records at once"},
		{Name: "bad_hold_max", Err: "hold_max_records: must be positive when hold_unresolved is set (got 0); set a number such as 10000, or hold_unresolved: 0"},
		{Name: "bad_encoding", Err: `encoding: unknown (got "protobuf"); set attributes (the public schema, default) or compact (only when the records go to flowtel gateways alone)`},
		{Name: "bad_timeout", Err: "wait_for_sync_timeout: must be positive when wait_for_sync is true (got 0s); set a duration such as 1m, or wait_for_sync: false"},
	})
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
	assert.Equal(t, 5*time.Second, cfg.HoldUnresolved)
	assert.Equal(t, 10000, cfg.HoldMaxRecords)
	assert.True(t, cfg.NetworkPolicies)
	assert.Equal(t, EncodingAttributes, cfg.Encoding, "a user's own pipeline sees the public schema")
	require.NoError(t, confmap.Validate(cfg))

	t.Setenv(NodeNameEnv, "")
	require.ErrorContains(t, confmap.Validate(createDefaultConfig()), "node_name: required")
}
