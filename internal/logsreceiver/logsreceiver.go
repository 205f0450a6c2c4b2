// Package logsreceiver builds the factory of a flowtel receiver that emits
// logs only (flow records), so the receivers share its checks.
package logsreceiver

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
)

// ErrNilConsumer is what creating a receiver without a next consumer returns.
var ErrNilConsumer = errors.New("nil next consumer")

// NewFactory returns the factory of a logs receiver of type typ: its
// configuration is a *C with defaults' values, and newReceiver makes the
// receiver once the next consumer is known not to be nil.
func NewFactory[C any, R receiver.Logs](typ component.Type, stability component.StabilityLevel, defaults func() *C,
	newReceiver func(receiver.Settings, *C, consumer.Logs) (R, error)) receiver.Factory {
	return receiver.NewFactory(typ, func() component.Config { return defaults() },
		receiver.WithLogs(func(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
			if next == nil {
				return nil, ErrNilConsumer
			}
			return newReceiver(set, cfg.(*C), next)
		}, stability))
}
