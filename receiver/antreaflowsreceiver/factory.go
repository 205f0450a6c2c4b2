package antreaflowsreceiver

import (
	"go.opentelemetry.io/collector/receiver"

	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14), should an agent compress
	"github.com/flowtel/flowtel/internal/logsreceiver"
	"github.com/flowtel/flowtel/receiver/antreaflowsreceiver/internal/metadata"
)

// NewFactory returns the factory of the antrea_flows receiver.
func NewFactory() receiver.Factory {
	return logsreceiver.NewFactory(metadata.Type, metadata.LogsStability, createDefaultConfig, newReceiver)
}
