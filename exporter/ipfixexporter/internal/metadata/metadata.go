// Package metadata holds the ipfix exporter's component type, instrumentation
// scope and stability (written by hand; flowtel does not use mdatagen).
package metadata

import "go.opentelemetry.io/collector/component"

var (
	// Type is the component type used in collector configurations.
	Type = component.MustNewType("ipfix")
	// ScopeName is the instrumentation scope of the exporter's own telemetry.
	ScopeName = "github.com/flowtel/flowtel/exporter/ipfixexporter"
)

// LogsStability is the stability of the logs signal.
const LogsStability = component.StabilityLevelAlpha
