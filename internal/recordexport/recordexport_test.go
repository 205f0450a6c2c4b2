package recordexport

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

func TestBlockingQueue(t *testing.T) {
	q := BlockingQueue(500, 3, 2*time.Second, 100, 400)
	if q.Sizer != exporterhelper.RequestSizerTypeItems || q.QueueSize != 500 || q.NumConsumers != 3 || !q.BlockOnOverflow {
		t.Fatalf("queue %+v: want 500 items, 3 consumers, blocking", q)
	}
	b := q.Batch.Get()
	if b == nil || b.Sizer != exporterhelper.RequestSizerTypeItems || b.FlushTimeout != 2*time.Second || b.MinSize != 100 || b.MaxSize != 400 {
		t.Fatalf("batch %+v: want items, 2s, 100 to 400", b)
	}
	if err := q.Validate(); err != nil {
		t.Fatalf("the queue does not validate: %v", err)
	}
	q = BlockingQueue(10, 1, time.Second, 5, 0)
	if got := q.Batch.Get().MaxSize; got != 0 {
		t.Fatalf("MaxSize %d, want 0 (no split) when maxRecords is 0", got)
	}
}

// The settings keep exporterhelper's keys when squashed into a configuration.
func TestSendingKeys(t *testing.T) {
	var cfg struct {
		Sending  `mapstructure:",squash"`
		Endpoint string `mapstructure:"endpoint"`
	}
	cfg.QueueConfig.GetOrInsertDefault()
	cm := confmap.NewFromStringMap(map[string]any{
		"endpoint":         "x:1",
		"timeout":          "7s",
		"sending_queue":    map[string]any{"queue_size": 42},
		"retry_on_failure": map[string]any{"enabled": false},
	})
	if err := cm.Unmarshal(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoint != "x:1" || cfg.TimeoutConfig.Timeout != 7*time.Second || cfg.RetryConfig.Enabled ||
		!cfg.QueueConfig.HasValue() || cfg.QueueConfig.Get().QueueSize != 42 {
		t.Fatalf("unmarshalled %+v", cfg)
	}
}
