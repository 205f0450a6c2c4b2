// Package components lists the factories of flowtel's three collector
// distributions, mirroring builder-config.yaml and distributions/*/manifest.yaml.
// OCB generates the real binaries' main packages; this list lets tests run and
// validate the distributions' configurations in process, and a test keeps it in
// step with the manifests.
package components

import (
	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter"
	"github.com/flowtel/flowtel/exporter/flowstreamexporter"
	"github.com/flowtel/flowtel/exporter/ipfixexporter"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor"
	"github.com/flowtel/flowtel/processor/k8sflowprocessor"
	"github.com/flowtel/flowtel/receiver/conntrackreceiver"
	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/signaltometricsconnector"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// Distribution names, as in distributions/ and builder-config.yaml.
const (
	Full    = "flowtel"
	Node    = "flowtel-node"
	Gateway = "flowtel-gateway"
)

// entry is one component of a distribution: its factory and the Go package
// that provides it, as the OCB manifests name it (checked by a test).
type entry[F any] struct {
	pkg     string
	factory F
}

// set is the component list of one distribution.
type set struct {
	receivers  []entry[receiver.Factory]
	processors []entry[processor.Factory]
	exporters  []entry[exporter.Factory]
	extensions []entry[extension.Factory]
	connectors []entry[connector.Factory]
}

const (
	core    = "go.opentelemetry.io/collector/"
	contrib = "github.com/open-telemetry/opentelemetry-collector-contrib/"
	flowtel = "github.com/flowtel/flowtel/"
)

var (
	otlpReceiver   = entry[receiver.Factory]{core + "receiver/otlpreceiver", otlpreceiver.NewFactory()}
	memoryLimiter  = entry[processor.Factory]{core + "processor/memorylimiterprocessor", memorylimiterprocessor.NewFactory()}
	debugExporter  = entry[exporter.Factory]{core + "exporter/debugexporter", debugexporter.NewFactory()}
	otlpExporter   = entry[exporter.Factory]{core + "exporter/otlpexporter", otlpexporter.NewFactory()}
	loadBalancing  = entry[exporter.Factory]{contrib + "exporter/loadbalancingexporter", loadbalancingexporter.NewFactory()}
	healthCheck    = entry[extension.Factory]{contrib + "extension/healthcheckextension", healthcheckextension.NewFactory()}
	fileStorage    = entry[extension.Factory]{contrib + "extension/storage/filestorage", filestorage.NewFactory()}
	signalToMetric = entry[connector.Factory]{contrib + "connector/signaltometricsconnector", signaltometricsconnector.NewFactory()}

	conntrack       = entry[receiver.Factory]{flowtel + "receiver/conntrackreceiver", conntrackreceiver.NewFactory()}
	k8sFlow         = entry[processor.Factory]{flowtel + "processor/k8sflowprocessor", k8sflowprocessor.NewFactory()}
	flowCorrelation = entry[processor.Factory]{flowtel + "processor/flowcorrelationprocessor", flowcorrelationprocessor.NewFactory()}
	ipfix           = entry[exporter.Factory]{flowtel + "exporter/ipfixexporter", ipfixexporter.NewFactory()}
	clickhouseFlows = entry[exporter.Factory]{flowtel + "exporter/clickhouseflowsexporter", clickhouseflowsexporter.NewFactory()}
	flowStream      = entry[exporter.Factory]{flowtel + "exporter/flowstreamexporter", flowstreamexporter.NewFactory()}
)

func sets() map[string]set {
	common := func() set {
		return set{
			receivers:  []entry[receiver.Factory]{otlpReceiver},
			processors: []entry[processor.Factory]{memoryLimiter},
			exporters:  []entry[exporter.Factory]{debugExporter, otlpExporter},
			extensions: []entry[extension.Factory]{healthCheck, fileStorage},
		}
	}
	node := common()
	node.receivers = append(node.receivers, conntrack)
	node.processors = append(node.processors, k8sFlow)
	node.exporters = append(node.exporters, loadBalancing, ipfix)

	gateway := common()
	gateway.processors = append(gateway.processors, flowCorrelation)
	gateway.exporters = append(gateway.exporters, ipfix, clickhouseFlows, flowStream)
	gateway.connectors = append(gateway.connectors, signalToMetric)

	full := common()
	full.receivers = append(full.receivers, conntrack)
	full.processors = append(full.processors, k8sFlow, flowCorrelation)
	full.exporters = append(full.exporters, loadBalancing, ipfix, clickhouseFlows, flowStream)
	full.connectors = append(full.connectors, signalToMetric)

	return map[string]set{Full: full, Node: node, Gateway: gateway}
}

// packages lists the Go packages of every component of the set.
func (s set) packages() []string {
	var out []string
	out = appendPkgs(out, s.receivers)
	out = appendPkgs(out, s.processors)
	out = appendPkgs(out, s.exporters)
	out = appendPkgs(out, s.extensions)
	return appendPkgs(out, s.connectors)
}

func appendPkgs[F any](out []string, es []entry[F]) []string {
	for _, e := range es {
		out = append(out, e.pkg)
	}
	return out
}

func factories[F component.Factory](es []entry[F]) (map[component.Type]F, error) {
	fs := make([]F, len(es))
	for i, e := range es {
		fs[i] = e.factory
	}
	return otelcol.MakeFactoryMap(fs...)
}

// Names lists the distributions.
func Names() []string { return []string{Full, Node, Gateway} }

// Factories returns the factories of the named distribution.
func Factories(distribution string) (otelcol.Factories, error) {
	s, ok := sets()[distribution]
	if !ok {
		return otelcol.Factories{}, errUnknown(distribution)
	}
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = factories(s.receivers); err != nil {
		return f, err
	}
	if f.Processors, err = factories(s.processors); err != nil {
		return f, err
	}
	if f.Exporters, err = factories(s.exporters); err != nil {
		return f, err
	}
	if f.Extensions, err = factories(s.extensions); err != nil {
		return f, err
	}
	if f.Connectors, err = factories(s.connectors); err != nil {
		return f, err
	}
	return f, nil
}

type errUnknown string

func (e errUnknown) Error() string { return "unknown distribution " + string(e) }
