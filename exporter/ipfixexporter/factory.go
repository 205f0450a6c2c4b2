package ipfixexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/layout"
	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
	_ "github.com/flowtel/flowtel/internal/grpcgzip" // gRPC's gzip at half the CPU (D14)
	"github.com/flowtel/flowtel/internal/recordexport"
)

// NewFactory returns the factory of the ipfix exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithLogs(createLogs, metadata.LogsStability))
}

// Defaults. The sending queue exports each request as it comes, without
// exporterhelper's batcher: behind flow_correlation a request is already one
// emitted batch (up to what the receivers hand on at once, 1000 records from
// a node collector or an agent's connection), and messages are filled from
// it. The batcher merges requests in place, so with it the exporter mutates
// what it consumes, and the gateway's fan-out copied every emitted batch for
// it because signal_to_metrics reads the same batch: 1.3 µs a record in, and
// the batch's 1 s wait before the last records of a burst went out. Without
// it the gateway spent about a fifth less CPU per record in on Antrea agents'
// IPFIX, with 136 instead of 142 records a message (testbed/results.md).
// A `batch` block in sending_queue turns it on, by default at 1000 records or
// 1 s (Antrea's exporter flush interval).
//
// The queue counts records, not requests, and blocks when full rather than
// refusing. Counted in requests (exporterhelper's default, 1000), a gateway
// fed by Antrea agents, one small request per agent message, refused records
// at the first burst (1,915 refusals, 6,280 of 180,000 connections lost at
// 330k records in). A refusal is worse than the loss itself behind
// flow_correlation: it retries the refused batch through the pipeline's
// fan-out, so every other exporter of the pipeline gets it twice. Blocking
// holds the burst back instead, into the gateway's receivers and the nodes'
// persistent queues.
const (
	defaultBatchFlush   = time.Second
	defaultBatchMinSize = 1000
	defaultQueueRecords = 100_000
	defaultTemplateTTL  = 600 * time.Second
	defaultNumConsumers = 4
)

func createDefaultConfig() component.Config {
	// Consumers decode and encode their batches in parallel; only the writes to
	// the one connection are serialised (IPFIX imposes no order between data
	// records, and sequence numbers are assigned at the write).
	q := recordexport.BlockingQueue(defaultQueueRecords, defaultNumConsumers, defaultBatchFlush, defaultBatchMinSize, 0)
	q.Batch = configoptional.Default(*q.Batch.Get()) // off until sending_queue has a batch block
	retry := configretry.NewDefaultBackOffConfig()
	retry.InitialInterval = backoffInitial
	retry.MaxInterval = backoffMax
	return &Config{
		Sending: recordexport.Sending{
			TimeoutConfig: exporterhelper.NewDefaultTimeoutConfig(),
			QueueConfig:   configoptional.Some(q),
			RetryConfig:   retry,
		},
		Transport:               TransportTCP,
		TLS:                     configtls.NewDefaultClientConfig(),
		Format:                  FormatIPFIX,
		RecordLayout:            string(layout.Aggregate),
		IncludeK8sNames:         true,
		TemplateRefreshInterval: defaultTemplateTTL,
	}
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	return newLogsExporter(ctx, set, cfg.(*Config), dialCollector)
}

// newLogsExporter wraps the exporter in exporterhelper's queue, retry and
// timeout; tests pass a dial that connects from inside a network namespace.
func newLogsExporter(ctx context.Context, set exporter.Settings, c *Config, dial dialFunc) (exporter.Logs, error) {
	e, err := newExporter(c, set)
	if err != nil {
		return nil, err
	}
	e.dial = dial
	return recordexport.NewLogs(ctx, set, c, &c.Sending, e.pushLogs, e.start, e.shutdown)
}
