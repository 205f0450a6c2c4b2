// Package distributions is the top layer of flowtel: the three collector
// distributions, each a directory with the collector configuration of its
// role (config.yaml) and its Dockerfile, and an OCB manifest: the full
// distribution's is builder-config.yaml at the repository root, the one
// source the slimmer ones (<name>/manifest.yaml) are checked against (each of
// their components is the full distribution's, at its version:
// TestSlimManifestsAreSubsets).
//
// OCB generates the real binaries' main packages from the manifests. This
// package gives tests the same component lists in process: components_gen.go
// is generated from the manifests (FLOWTEL_UPDATE_GENERATED=1 go test
// ./distributions rewrites it; the test fails while it is stale), so a
// component is added to a distribution in its manifest only.
package distributions

import (
	"fmt"
	"path/filepath"
	"runtime"

	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// Distribution names: the directories under distributions/ and the binaries
// `make build` writes to _build/<name>/<name>.
const (
	Full    = "flowtel"
	Node    = "flowtel-node"
	Gateway = "flowtel-gateway"
)

// Names lists the distributions.
func Names() []string { return []string{Full, Node, Gateway} }

// Dir is the directory of the named distribution (distributions/<name>).
func Dir(name string) string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), name)
}

// FullManifest is the full distribution's OCB manifest, builder-config.yaml at
// the repository root.
const FullManifest = "builder-config.yaml"

// Manifest is the path of the named distribution's OCB manifest: the root's
// builder-config.yaml for the full distribution, distributions/<name>/manifest.yaml
// for the others.
func Manifest(name string) string {
	if name == Full {
		return filepath.Join(filepath.Dir(Dir("")), FullManifest)
	}
	return filepath.Join(Dir(name), "manifest.yaml")
}

// Config is the path of the named distribution's collector configuration:
// the one configuration of its role, which kustomize, Helm, the Operator CRs
// and the testbed embed.
func Config(name string) string { return filepath.Join(Dir(name), "config.yaml") }

// Factories returns the factories of the named distribution: the components
// its manifest lists.
func Factories(name string) (otelcol.Factories, error) {
	s, ok := sets[name]
	if !ok {
		return otelcol.Factories{}, fmt.Errorf("distribution: %q is unknown; use one of %v", name, Names())
	}
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap(s.receivers...); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap(s.processors...); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap(s.exporters...); err != nil {
		return f, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap(s.extensions...); err != nil {
		return f, err
	}
	if f.Connectors, err = otelcol.MakeFactoryMap(s.connectors...); err != nil {
		return f, err
	}
	return f, nil
}

// set is the component list of one distribution, as its manifest names it.
type set struct {
	receivers  []receiver.Factory
	processors []processor.Factory
	exporters  []exporter.Factory
	extensions []extension.Factory
	connectors []connector.Factory
}
