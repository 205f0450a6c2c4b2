package flowcorrelationprocessor

import (
	"testing"

	"github.com/flowtel/flowtel/internal/configtest"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/aggregate"
)

// Every attribute value the processor records is declared in metadata.yaml.
func TestAttributeValuesAreDeclared(t *testing.T) {
	configtest.Enum(t, "drop_reason", reasonDecodeError, reasonMissingTimestamp)
	configtest.Enum(t, "failure_reason", reasonDownstreamPerm, reasonRetryExhausted, reasonRetryQueueFull,
		reasonShutdownUndeliver, reasonDownstreamError, reasonDownstreamQueueFull)
	var exports []string
	for r := aggregate.ReasonReady; r <= aggregate.ReasonReplaced; r++ {
		exports = append(exports, r.String())
	}
	configtest.Enum(t, "export_reason", append(exports, ModeProxy)...)
	configtest.Enum(t, "unpaired_reason", aggregate.ReasonPairingTimeout.String(), aggregate.ReasonEvicted.String(),
		aggregate.ReasonFlush.String(), aggregate.ReasonReplaced.String())
	configtest.Enum(t, "late_kind", kindDuplicate, kindReordered, kindReplaced)
	var states []string
	for s := flowrecord.CorrelationPaired; s <= flowrecord.CorrelationNotRequired; s++ {
		states = append(states, s.String())
	}
	configtest.Enum(t, "state", append(states, stateNone)...)
}
