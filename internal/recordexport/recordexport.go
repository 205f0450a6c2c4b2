// Package recordexport holds what flowtel's exporters of flow records to an
// outside store (clickhouse_flows, ipfix) take alike from the collector's
// exporterhelper: the timeout, sending queue and retry settings, a sending
// queue that counts records and holds a burst back rather than refuse it,
// and the wrapping of their push function in all three.
package recordexport // import "github.com/flowtel/flowtel/internal/recordexport"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// Sending is the exporterhelper part of an exporter's configuration, squashed
// into it: timeout at the top level, sending_queue and retry_on_failure.
type Sending struct {
	TimeoutConfig exporterhelper.TimeoutConfig                             `mapstructure:",squash"`
	QueueConfig   configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig   configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`
}

// BlockingQueue is a sending queue of queueRecords records drained by
// consumers, batching records until a batch holds minRecords or is flush old
// (and, with maxRecords above 0, splitting batches above maxRecords).
//
// The batcher merges requests in place, so an exporter with it declares that
// it mutates what it consumes, and a pipeline's fan-out then copies every
// batch for it when another consumer (signal_to_metrics) reads the same batch;
// an exporter whose requests come batched already can leave it off until
// configured (the ipfix exporter does).
//
// It counts records, not requests, and blocks when full rather than refusing:
// behind flow_correlation a refused batch is retried through the pipeline's
// fan-out, so every other exporter of the pipeline would get it twice.
// Blocking holds the burst back instead, into the gateway's receivers and the
// nodes' persistent queues (the ipfix exporter's defaults say more).
func BlockingQueue(queueRecords, consumers int, flush time.Duration, minRecords, maxRecords int) exporterhelper.QueueBatchConfig {
	q := exporterhelper.NewDefaultQueueConfig()
	q.Sizer = exporterhelper.RequestSizerTypeItems
	q.QueueSize = int64(queueRecords)
	q.NumConsumers = consumers
	q.BlockOnOverflow = true
	q.Batch = configoptional.Some(exporterhelper.BatchConfig{
		FlushTimeout: flush,
		Sizer:        exporterhelper.RequestSizerTypeItems,
		MinSize:      int64(minRecords),
		MaxSize:      int64(maxRecords),
	})
	return q
}

// NewLogs wraps push in s's timeout, retry and sending queue, with the
// exporter's start and shutdown. The exporters only read the logs they are
// given.
func NewLogs(ctx context.Context, set exporter.Settings, cfg component.Config, s *Sending,
	push consumer.ConsumeLogsFunc, start component.StartFunc, shutdown component.ShutdownFunc,
) (exporter.Logs, error) {
	return exporterhelper.NewLogs(ctx, set, cfg, push,
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(s.TimeoutConfig),
		exporterhelper.WithRetry(s.RetryConfig),
		exporterhelper.WithQueue(s.QueueConfig),
		exporterhelper.WithStart(start),
		exporterhelper.WithShutdown(shutdown))
}
