package components

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/otelcol/otelcoltest"
	"gopkg.in/yaml.v3"
)

var repoRoot = filepath.Join("..", "..")

func manifestPath(dist string) string {
	if dist == Full {
		return filepath.Join(repoRoot, "builder-config.yaml")
	}
	return filepath.Join(repoRoot, "distributions", dist, "manifest.yaml")
}

// Each distribution's default config.yaml loads and validates against the
// distribution's factories.
// K8S_NODE_NAME is what the downward API provides in a real DaemonSet.
func TestDistributionConfigsValidate(t *testing.T) {
	t.Setenv("K8S_NODE_NAME", "node-1")
	for _, dist := range Names() {
		t.Run(dist, func(t *testing.T) {
			factories, err := Factories(dist)
			require.NoError(t, err)
			cfg, err := otelcoltest.LoadConfigAndValidate(filepath.Join(repoRoot, "distributions", dist, "config.yaml"), factories)
			require.NoError(t, err)
			assert.NotEmpty(t, cfg.Service.Pipelines)
		})
	}
}

type manifest struct {
	Receivers  []module `yaml:"receivers"`
	Processors []module `yaml:"processors"`
	Exporters  []module `yaml:"exporters"`
	Extensions []module `yaml:"extensions"`
	Connectors []module `yaml:"connectors"`
}

type module struct {
	GoMod  string `yaml:"gomod"`
	Import string `yaml:"import"`
}

// importPath is the package a manifest entry imports: `import` when given, else the module.
func (m module) importPath() string {
	if m.Import != "" {
		return m.Import
	}
	p := m.GoMod
	for i := range p {
		if p[i] == ' ' {
			return p[:i]
		}
	}
	return p
}

// The Go factory lists mirror the OCB manifests: the same component packages.
func TestFactoriesMatchManifests(t *testing.T) {
	for _, dist := range Names() {
		t.Run(dist, func(t *testing.T) {
			raw, err := os.ReadFile(manifestPath(dist))
			require.NoError(t, err)
			var m manifest
			require.NoError(t, yaml.Unmarshal(raw, &m))
			var fromManifest []string
			for _, list := range [][]module{m.Receivers, m.Processors, m.Exporters, m.Extensions, m.Connectors} {
				for _, mod := range list {
					fromManifest = append(fromManifest, mod.importPath())
				}
			}
			fromGo := sets()[dist].packages()
			sort.Strings(fromManifest)
			sort.Strings(fromGo)
			assert.Equal(t, fromManifest, fromGo)
		})
	}
}

func TestUnknownDistribution(t *testing.T) {
	_, err := Factories("nope")
	assert.EqualError(t, err, "unknown distribution nope")
}
