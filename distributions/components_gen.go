// Code generated from builder-config.yaml and distributions/*/manifest.yaml by TestComponentsGenerated; DO NOT EDIT.
// Regenerate: FLOWTEL_UPDATE_GENERATED=1 go test ./distributions

package distributions

import (
	clickhouseflowsexporter "github.com/flowtel/flowtel/exporter/clickhouseflowsexporter"
	flowstreamexporter "github.com/flowtel/flowtel/exporter/flowstreamexporter"
	ipfixexporter "github.com/flowtel/flowtel/exporter/ipfixexporter"
	loadbalancingexporter "github.com/flowtel/flowtel/exporter/loadbalancingexporter"
	filestorageextension "github.com/flowtel/flowtel/extension/filestorageextension"
	k8scertificatesextension "github.com/flowtel/flowtel/extension/k8scertificatesextension"
	servertlsextension "github.com/flowtel/flowtel/extension/servertlsextension"
	flowcorrelationprocessor "github.com/flowtel/flowtel/processor/flowcorrelationprocessor"
	k8sflowprocessor "github.com/flowtel/flowtel/processor/k8sflowprocessor"
	nodeidentityprocessor "github.com/flowtel/flowtel/processor/nodeidentityprocessor"
	antreaflowsreceiver "github.com/flowtel/flowtel/receiver/antreaflowsreceiver"
	conntrackreceiver "github.com/flowtel/flowtel/receiver/conntrackreceiver"
	signaltometricsconnector "github.com/open-telemetry/opentelemetry-collector-contrib/connector/signaltometricsconnector"
	bearertokenauthextension "github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	healthcheckextension "github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	debugexporter "go.opentelemetry.io/collector/exporter/debugexporter"
	otlpexporter "go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/processor"
	memorylimiterprocessor "go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	otlpreceiver "go.opentelemetry.io/collector/receiver/otlpreceiver"
)

// sets are the component lists of the distributions, in manifest order.
var sets = map[string]set{
	"flowtel": {
		receivers:  []receiver.Factory{otlpreceiver.NewFactory(), antreaflowsreceiver.NewFactory(), conntrackreceiver.NewFactory()},
		processors: []processor.Factory{memorylimiterprocessor.NewFactory(), k8sflowprocessor.NewFactory(), flowcorrelationprocessor.NewFactory(), nodeidentityprocessor.NewFactory()},
		exporters:  []exporter.Factory{debugexporter.NewFactory(), otlpexporter.NewFactory(), ipfixexporter.NewFactory(), clickhouseflowsexporter.NewFactory(), flowstreamexporter.NewFactory(), loadbalancingexporter.NewFactory()},
		extensions: []extension.Factory{healthcheckextension.NewFactory(), filestorageextension.NewFactory(), bearertokenauthextension.NewFactory(), servertlsextension.NewFactory(), k8scertificatesextension.NewFactory()},
		connectors: []connector.Factory{signaltometricsconnector.NewFactory()},
	},
	"flowtel-node": {
		receivers:  []receiver.Factory{otlpreceiver.NewFactory(), conntrackreceiver.NewFactory()},
		processors: []processor.Factory{memorylimiterprocessor.NewFactory(), k8sflowprocessor.NewFactory()},
		exporters:  []exporter.Factory{debugexporter.NewFactory(), otlpexporter.NewFactory(), ipfixexporter.NewFactory(), loadbalancingexporter.NewFactory()},
		extensions: []extension.Factory{healthcheckextension.NewFactory(), filestorageextension.NewFactory(), bearertokenauthextension.NewFactory()},
	},
	"flowtel-gateway": {
		receivers:  []receiver.Factory{otlpreceiver.NewFactory(), antreaflowsreceiver.NewFactory()},
		processors: []processor.Factory{memorylimiterprocessor.NewFactory(), flowcorrelationprocessor.NewFactory(), nodeidentityprocessor.NewFactory()},
		exporters:  []exporter.Factory{debugexporter.NewFactory(), otlpexporter.NewFactory(), ipfixexporter.NewFactory(), clickhouseflowsexporter.NewFactory(), flowstreamexporter.NewFactory()},
		extensions: []extension.Factory{healthcheckextension.NewFactory(), filestorageextension.NewFactory(), servertlsextension.NewFactory(), k8scertificatesextension.NewFactory()},
		connectors: []connector.Factory{signaltometricsconnector.NewFactory()},
	},
}
