// Package metadata holds the clickhouse_flows exporter's component type,
// instrumentation scope and stability (written by hand; flowtel does not use mdatagen).
package metadata

import "go.opentelemetry.io/collector/component"

var (
	// Type is the component type used in collector configurations.
	Type = component.MustNewType("clickhouse_flows")
	// ScopeName is the instrumentation scope of the exporter's own telemetry.
	ScopeName = "github.com/flowtel/flowtel/exporter/clickhouseflowsexporter"
)

// LogsStability is the stability of the logs signal.
const LogsStability = component.StabilityLevelAlpha
