package flowcorrelationprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
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
	tests := []struct {
		name string
		want *Config
	}{
		{"", &Config{Mode: ModeAggregate, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords}},
		{"custom", &Config{Mode: ModeAggregate, ActiveTimeout: 30 * time.Second, InactiveTimeout: 45 * time.Second,
			PairingTimeout: 2 * time.Minute, MaxRecords: 50000}},
		{"proxy", &Config{Mode: ModeProxy, ActiveTimeout: 60 * time.Second, InactiveTimeout: 90 * time.Second,
			MaxRecords: defaultMaxRecords}},
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

func TestPairingTimeoutDefaultsToThreeActiveTimeouts(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, 180*time.Second, cfg.pairingTimeout())
	cfg.ActiveTimeout = 10 * time.Second
	assert.Equal(t, 30*time.Second, cfg.pairingTimeout())
	cfg.PairingTimeout = 7 * time.Second
	assert.Equal(t, 7*time.Second, cfg.pairingTimeout())
}
