package conntrackreceiver

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/flowtel/flowtel/receiver/conntrackreceiver/internal/metadata"
)

type sinkNop struct{}

func (sinkNop) Capabilities() consumer.Capabilities          { return consumer.Capabilities{} }
func (sinkNop) ConsumeLogs(context.Context, plog.Logs) error { return nil }

func receivertestSettings(*testing.T) receiver.Settings {
	return receivertest.NewNopSettings(metadata.Type)
}
