// Package configtest runs a component's TestLoadConfig table over its
// testdata/config.yaml: each named instance is loaded over the factory's
// defaults, as the collector loads it, and validated; the whole struct is
// compared with the one expected, or the validation errors with the ones
// expected. Every instance of the file must have a case. Enum checks the
// attribute values a component records against its metadata.yaml.
package configtest // import "github.com/flowtel/flowtel/internal/configtest"

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Case is one instance of testdata/config.yaml, named type/Name ("" for the
// instance named by the type alone). A valid one loads to Want; an invalid
// one fails validation with exactly the error Err, or with an error containing
// every string of WantErr.
type Case struct {
	Name    string
	Want    component.Config
	Err     string
	WantErr []string
}

// LoadConfig checks every case against testdata/config.yaml.
func LoadConfig(t *testing.T, factory component.Factory, cases []Case) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	var named []string
	for _, tc := range cases {
		id := component.NewIDWithName(factory.Type(), tc.Name)
		named = append(named, id.String())
		t.Run(id.String(), func(t *testing.T) {
			sub, err := cm.Sub(id.String())
			require.NoError(t, err)
			cfg := factory.CreateDefaultConfig()
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tc.Err != "" {
				require.EqualError(t, err, tc.Err)
				return
			}
			if tc.WantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.Want, cfg)
				return
			}
			require.Error(t, err)
			for _, want := range tc.WantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
	for instance := range cm.ToStringMap() {
		assert.True(t, slices.Contains(named, instance), "testdata/config.yaml: %s has no case", instance)
	}
}

// Defaults is the factory's default config, of type *C, with the changes set
// makes: the Want of a case that differs from the defaults in a few fields.
func Defaults[C any](factory component.Factory, set func(*C)) *C {
	c := factory.CreateDefaultConfig().(*C)
	set(c)
	return c
}
