// Package metadata holds the k8s_flow processor's component identity
// (written by hand: flowtel does not run mdatagen).
package metadata

import "go.opentelemetry.io/collector/component"

var (
	// Type is the component type used in collector configurations.
	Type = component.MustNewType("k8s_flow")
	// ScopeName is the instrumentation scope of the processor's own telemetry.
	ScopeName = "github.com/flowtel/flowtel/processor/k8sflowprocessor"
)

// LogsStability is the stability of the logs pipeline support.
const LogsStability = component.StabilityLevelAlpha
