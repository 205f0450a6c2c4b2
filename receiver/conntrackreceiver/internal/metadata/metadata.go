// Package metadata holds the conntrack receiver's component type, scope name
// and stability, written by hand (flowtel does not use mdatagen).
package metadata

import "go.opentelemetry.io/collector/component"

var (
	// Type is the component type used in collector configurations.
	Type = component.MustNewType("conntrack")
	// ScopeName is the instrumentation scope of the receiver's records and metrics.
	ScopeName = "github.com/flowtel/flowtel/receiver/conntrackreceiver"
)

// LogsStability is the stability of the logs signal.
const LogsStability = component.StabilityLevelAlpha
