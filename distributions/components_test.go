package distributions

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/otelcol/otelcoltest"
	"gopkg.in/yaml.v3"
)

// updateGenerated rewrites the generated files instead of failing when they are stale.
var updateGenerated = os.Getenv("FLOWTEL_UPDATE_GENERATED") == "1"

// manifest is the part of an OCB manifest that lists components.
type manifest struct {
	Replaces   []string `yaml:"replaces"`
	Providers  []module `yaml:"providers"`
	Receivers  []module `yaml:"receivers"`
	Processors []module `yaml:"processors"`
	Exporters  []module `yaml:"exporters"`
	Extensions []module `yaml:"extensions"`
	Connectors []module `yaml:"connectors"`
}

type module struct {
	GoMod  string `yaml:"gomod"`
	Import string `yaml:"import"`
	Path   string `yaml:"path"`
}

// importPath is the package a manifest entry imports: `import` when given, else the module.
func (m module) importPath() string {
	if m.Import != "" {
		return m.Import
	}
	p, _, _ := strings.Cut(m.GoMod, " ")
	return p
}

// classes are the manifest's component lists, in the order of set's fields.
var classes = []struct{ field, pkg, factory string }{
	{"receivers", "go.opentelemetry.io/collector/receiver", "receiver.Factory"},
	{"processors", "go.opentelemetry.io/collector/processor", "processor.Factory"},
	{"exporters", "go.opentelemetry.io/collector/exporter", "exporter.Factory"},
	{"extensions", "go.opentelemetry.io/collector/extension", "extension.Factory"},
	{"connectors", "go.opentelemetry.io/collector/connector", "connector.Factory"},
}

// generate renders components_gen.go from the manifests: one NewFactory() call
// per manifest entry, imported under the last element of its package path.
func generate(t *testing.T) []byte {
	t.Helper()
	imports := map[string]string{} // alias -> package
	var body bytes.Buffer
	for _, name := range Names() {
		raw, err := os.ReadFile(Manifest(name))
		require.NoError(t, err)
		var m manifest
		require.NoError(t, yaml.Unmarshal(raw, &m))
		fmt.Fprintf(&body, "\t%q: {\n", name)
		for i, list := range [][]module{m.Receivers, m.Processors, m.Exporters, m.Extensions, m.Connectors} {
			if len(list) == 0 {
				continue
			}
			var calls []string
			for _, mod := range list {
				pkg := mod.importPath()
				alias := strings.ReplaceAll(path.Base(pkg), "-", "")
				if other, ok := imports[alias]; ok && other != pkg {
					t.Fatalf("%s: %s and %s are both imported as %s: rename one in the generator", Manifest(name), pkg, other, alias)
				}
				imports[alias] = pkg
				calls = append(calls, alias+".NewFactory()")
			}
			fmt.Fprintf(&body, "\t\t%s: []%s{%s},\n", classes[i].field, classes[i].factory, strings.Join(calls, ", "))
		}
		body.WriteString("\t},\n")
	}
	var src bytes.Buffer
	src.WriteString("// Code generated from builder-config.yaml and distributions/*/manifest.yaml by TestComponentsGenerated; DO NOT EDIT.\n")
	src.WriteString("// Regenerate: FLOWTEL_UPDATE_GENERATED=1 go test ./distributions\n\npackage distributions\n\nimport (\n")
	pkgs := []string{}
	for _, c := range classes {
		pkgs = append(pkgs, c.pkg)
	}
	for _, pkg := range imports {
		pkgs = append(pkgs, pkg)
	}
	slices.Sort(pkgs)
	var lines []string
	for _, pkg := range pkgs {
		lines = append(lines, fmt.Sprintf("\t%s %q\n", aliasOf(imports, pkg), pkg))
	}
	src.WriteString(strings.Join(lines, ""))
	src.WriteString(")\n\n// sets are the component lists of the distributions, in manifest order.\nvar sets = map[string]set{\n")
	src.Write(body.Bytes())
	src.WriteString("}\n")
	out, err := format.Source(src.Bytes())
	require.NoError(t, err, "%s", src.Bytes())
	return out
}

// components_gen.go is what the manifests generate: a component is added to a
// distribution in its manifest.yaml, and this test (or its update mode)
// brings the Go list along.
func TestComponentsGenerated(t *testing.T) {
	want := generate(t)
	file := filepath.Join(Dir(""), "components_gen.go")
	if updateGenerated {
		require.NoError(t, os.WriteFile(file, want, 0o644))
	}
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s is stale: run FLOWTEL_UPDATE_GENERATED=1 go test ./distributions", file)
}

// builder-config.yaml, the full distribution's manifest, is the one source
// of component versions: every component a slimmer distribution lists is
// listed there, the same module at the same version, imported and wired the
// same way, and every replace of a slimmer manifest is one of its replaces.
// So a component or a version is changed in builder-config.yaml first, and
// this test says which slim manifest still differs.
func TestSlimManifestsAreSubsets(t *testing.T) {
	read := func(name string) manifest {
		raw, err := os.ReadFile(Manifest(name))
		require.NoError(t, err)
		var m manifest
		require.NoError(t, yaml.Unmarshal(raw, &m))
		return m
	}
	full := read(Full)
	lists := func(m manifest) [][]module {
		return [][]module{m.Receivers, m.Processors, m.Exporters, m.Extensions, m.Connectors}
	}
	for _, name := range Names() {
		if name == Full {
			continue
		}
		slim := read(name)
		for i, list := range lists(slim) {
			for _, mod := range list {
				if !slices.Contains(lists(full)[i], mod) {
					t.Errorf("%s: %s %s (%s) is not in %s as it is there; list it in %s at the same version first",
						Manifest(name), classes[i].field, mod.importPath(), mod.GoMod, FullManifest, FullManifest)
				}
			}
		}
		for _, p := range slim.Providers {
			if !slices.Contains(full.Providers, p) {
				t.Errorf("%s: provider %s is not in %s at that version", Manifest(name), p.GoMod, FullManifest)
			}
		}
		for _, r := range slim.Replaces {
			if !slices.Contains(full.Replaces, r) {
				t.Errorf("%s: replace %q is not one of %s's", Manifest(name), r, FullManifest)
			}
		}
	}
}

// Every distribution has factories for every class it lists, none twice.
func TestFactories(t *testing.T) {
	for _, name := range Names() {
		f, err := Factories(name)
		require.NoError(t, err, name)
		assert.NotEmpty(t, f.Receivers, name)
		assert.NotEmpty(t, f.Exporters, name)
	}
	_, err := Factories("nope")
	assert.EqualError(t, err, `distribution: "nope" is unknown; use one of [flowtel flowtel-node flowtel-gateway]`)
}

// aliasOf is the name pkg is imported as ("" for the class packages).
func aliasOf(imports map[string]string, pkg string) string {
	for alias, p := range imports {
		if p == pkg {
			return alias
		}
	}
	return ""
}

// Each distribution's config.yaml loads and validates against the
// distribution's factories, with the environment a Pod gives it.
func TestConfigsValidate(t *testing.T) {
	t.Setenv("K8S_NODE_NAME", "node-1")
	t.Setenv("POD_NAMESPACE", "flowtel")
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			factories, err := Factories(name)
			require.NoError(t, err)
			cfg, err := otelcoltest.LoadConfigAndValidate(Config(name), factories)
			require.NoError(t, err)
			assert.NotEmpty(t, cfg.Service.Pipelines)
		})
	}
}
