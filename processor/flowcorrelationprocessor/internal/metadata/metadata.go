// Package metadata holds the flow_correlation processor's identity: its
// component type, instrumentation scope and stability. Written by hand (no
// mdatagen), in the shape mdatagen would generate.
package metadata

import "go.opentelemetry.io/collector/component"

var (
	// Type is the component type used in collector configurations.
	Type = component.MustNewType("flow_correlation")
	// ScopeName is the instrumentation scope of the processor's own telemetry
	// and of the records it emits in aggregate mode.
	ScopeName = "github.com/flowtel/flowtel/processor/flowcorrelationprocessor"
)

// LogsStability is the stability of the logs pipeline support.
const LogsStability = component.StabilityLevelAlpha
