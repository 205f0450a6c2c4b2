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

// TestLoadConfig loads every instance of testdata/config.yaml over the
// defaults, as the collector does, and compares the whole struct, or the
// validation errors of the invalid ones.
func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	custom := defaultKubernetesConfig()
	custom.AuthType, custom.KubeConfig, custom.PodLabels = "kubeConfig", "/etc/flowtel/kubeconfig", true
	custom.WaitForSync, custom.DeletedPodRetention = false, 10*time.Minute
	off := configoptional.Default(defaultKubernetesConfig()) // absent: no index
	tests := []struct {
		name    string
		want    *Config
		wantErr []string
	}{
		{name: "", want: &Config{Mode: ModeAggregate, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: off}},
		{name: "custom", want: &Config{Mode: ModeAggregate, ActiveTimeout: 30 * time.Second, InactiveTimeout: 45 * time.Second,
			PairingTimeout: 2 * time.Minute, MaxRecords: 50000, Kubernetes: off}},
		{name: "proxy", want: &Config{Mode: ModeProxy, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: off}},
		// An empty kubernetes section turns the index on with its defaults.
		{name: "kubernetes", want: &Config{Mode: ModeAggregate, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: configoptional.Some(defaultKubernetesConfig())}},
		{name: "kubernetes_custom", want: &Config{Mode: ModeProxy, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: configoptional.Some(custom)}},
		{name: "bad_mode", wantErr: []string{`mode: unknown (got "correlate"); use aggregate or proxy`}},
		{name: "bad_values", wantErr: []string{
			"active_timeout: must be positive (got 0s); set a duration such as 1m0s",
			"inactive_timeout: must be positive (got -1s); set a duration such as 1m30s",
			"pairing_timeout: must not be negative (got -5s); set 0 for 3 × active_timeout, or a positive duration",
			"max_records: must be at least 1 (got 0); set the number of connections to hold, such as 1000000",
		}},
		{name: "bad_kubernetes", wantErr: []string{
			`kubernetes: auth_type: unknown (got "token"); use serviceAccount (in a Pod) or kubeConfig`,
			"wait_for_sync_timeout: must be positive when wait_for_sync is true (got 0s); set a duration such as 1m, or wait_for_sync: false",
			"deleted_pod_retention: must be positive (got 0s); set a duration such as 5m0s",
		}},
		{name: "kubeconfig_unused", wantErr: []string{
			"kubernetes: kubeconfig: only used with auth_type kubeConfig (got auth_type serviceAccount); set auth_type: kubeConfig or remove kubeconfig",
		}},
	}
	for _, tt := range tests {
		id := component.NewIDWithName(metadata.Type, tt.name)
		t.Run(id.String(), func(t *testing.T) {
			sub, err := cm.Sub(id.String())
			require.NoError(t, err)
			cfg := createDefaultConfig().(*Config)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want, cfg)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
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
