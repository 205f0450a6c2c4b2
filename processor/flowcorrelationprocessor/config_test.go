package flowcorrelationprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg, confmap.Validate(cfg)
}

func TestLoadConfig(t *testing.T) {
	off := configoptional.Default(defaultKubernetesConfig()) // absent: no index
	custom := defaultKubernetesConfig()
	custom.AuthType, custom.KubeConfig, custom.PodLabels = "kubeConfig", "/etc/flowtel/kubeconfig", true
	custom.WaitForSync, custom.DeletedPodRetention = false, 10*time.Minute
	tests := []struct {
		name string
		want *Config
	}{
		{"", &Config{Mode: ModeAggregate, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: off}},
		{"custom", &Config{Mode: ModeAggregate, ActiveTimeout: 30 * time.Second, InactiveTimeout: 45 * time.Second,
			PairingTimeout: 2 * time.Minute, MaxRecords: 50000, Kubernetes: off}},
		{"proxy", &Config{Mode: ModeProxy, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: off}},
		{"kubernetes", &Config{Mode: ModeAggregate, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: configoptional.Some(defaultKubernetesConfig())}},
		{"kubernetes_custom", &Config{Mode: ModeProxy, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: configoptional.Some(custom)}},
	}
	for _, tt := range tests {
		t.Run("flow_correlation/"+tt.name, func(t *testing.T) {
			cfg, err := loadConfig(t, tt.name)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestInvalidConfigsNameTheField(t *testing.T) {
	_, err := loadConfig(t, "bad_mode")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `mode: "correlate" is not one of "aggregate", "proxy"`)

	_, err = loadConfig(t, "bad_values")
	require.Error(t, err)
	for _, want := range []string{
		"active_timeout: must be positive, got 0s",
		"inactive_timeout: must be positive, got -1s",
		"pairing_timeout: must not be negative (0 means 3 × active_timeout), got -5s",
		"max_records: must be at least 1, got 0",
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestKubernetesOffByDefault(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.False(t, cfg.Kubernetes.HasValue())
	cfg, err = loadConfig(t, "kubernetes")
	require.NoError(t, err)
	assert.True(t, cfg.Kubernetes.HasValue(), "an empty kubernetes section turns the index on with its defaults")
}

func TestInvalidKubernetesConfigNamesTheField(t *testing.T) {
	_, err := loadConfig(t, "bad_kubernetes")
	require.Error(t, err)
	for _, want := range []string{
		`kubernetes: auth_type: "token" is not "serviceAccount" or "kubeConfig"`,
		"wait_for_sync_timeout: must be positive when wait_for_sync is true, got 0s",
		"deleted_pod_retention: must be positive, got 0s",
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestPairingTimeoutDefaultsToThreeActiveTimeouts(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, 180*time.Second, cfg.pairingTimeout())
	cfg.ActiveTimeout = 10 * time.Second
	assert.Equal(t, 30*time.Second, cfg.pairingTimeout())
	cfg.PairingTimeout = 7 * time.Second
	assert.Equal(t, 7*time.Second, cfg.pairingTimeout())
}
