package flowcorrelationprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/flowtel/flowtel/internal/configtest"
)

// TestLoadConfig: every instance of testdata/config.yaml, loaded over the
// defaults as the collector loads it, is the whole struct expected, or fails
// validation with the errors expected.
func TestLoadConfig(t *testing.T) {
	custom := defaultKubernetesConfig()
	custom.AuthType, custom.KubeConfig, custom.PodLabels = "kubeConfig", "/etc/flowtel/kubeconfig", true
	custom.WaitForSync, custom.DeletedPodRetention = false, 10*time.Minute
	off := configoptional.Default(defaultKubernetesConfig()) // absent: no index
	configtest.LoadConfig(t, NewFactory(), []configtest.Case{
		{Name: "", Want: &Config{Mode: ModeAggregate, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: off}},
		{Name: "custom", Want: &Config{Mode: ModeAggregate, ActiveTimeout: 30 * time.Second, InactiveTimeout: 45 * time.Second,
			PairingTimeout: 2 * time.Minute, MaxRecords: 50000, Kubernetes: off}},
		{Name: "proxy", Want: &Config{Mode: ModeProxy, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: off}},
		// An empty kubernetes section turns the index on with its defaults.
		{Name: "kubernetes", Want: &Config{Mode: ModeAggregate, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: configoptional.Some(defaultKubernetesConfig())}},
		{Name: "kubernetes_custom", Want: &Config{Mode: ModeProxy, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords, Kubernetes: configoptional.Some(custom)}},
		{Name: "bad_mode", WantErr: []string{`mode: unknown (got "correlate"); use aggregate or proxy`}},
		{Name: "bad_values", WantErr: []string{
			"active_timeout: must be positive (got 0s); set a duration such as 1m0s",
			"inactive_timeout: must be positive (got -1s); set a duration such as 1m30s",
			"pairing_timeout: must not be negative (got -5s); set 0 for 3 × active_timeout, or a positive duration",
			"max_records: must be at least 1 (got 0); set the number of connections to hold, such as 1000000",
		}},
		{Name: "bad_kubernetes", WantErr: []string{
			`kubernetes: auth_type: unknown (got "token"); set serviceAccount (in a Pod) or kubeConfig`,
			"wait_for_sync_timeout: must be positive when wait_for_sync is true (got 0s); set a duration such as 1m, or wait_for_sync: false",
			"deleted_pod_retention: must be positive (got 0s); set a duration such as 5m0s",
		}},
		{Name: "kubeconfig_unused", WantErr: []string{
			"kubernetes: kubeconfig: only used with auth_type: kubeConfig (got auth_type: serviceAccount); set auth_type: kubeConfig, or remove kubeconfig",
		}},
	})
}

func TestPairingTimeoutDefaultsToThreeActiveTimeouts(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, 180*time.Second, cfg.pairingTimeout())
	cfg.ActiveTimeout = 10 * time.Second
	assert.Equal(t, 30*time.Second, cfg.pairingTimeout())
	cfg.PairingTimeout = 7 * time.Second
	assert.Equal(t, 7*time.Second, cfg.pairingTimeout())
}
