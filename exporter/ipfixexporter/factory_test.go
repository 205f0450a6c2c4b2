package ipfixexporter

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/flowtel/flowtel/exporter/ipfixexporter/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	if f.Type() != metadata.Type {
		t.Fatalf("type %s", f.Type())
	}
	cfg := f.CreateDefaultConfig().(*Config)
	if err := componenttest.CheckConfigStruct(cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.QueueConfig.HasValue() || cfg.QueueConfig.Get().Batch.Get() == nil {
		t.Fatal("the default sending queue must batch records")
	}
	cfg.Endpoint = "127.0.0.1:1" // nothing listens: start must not need the collector
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultQueueToCollector: the exporter as the collector builds it, with
// the default sending queue (batching, several consumers encoding in
// parallel), delivers every record exactly once to the go-ipfix collector.
func TestDefaultQueueToCollector(t *testing.T) {
	col := startCollector(t, TransportTCP, nil)
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoint = col.Endpoint()
	q := cfg.QueueConfig.Get()
	q.Batch.Get().FlushTimeout = 100 * time.Millisecond
	q.Batch.Get().MinSize = 200
	ctx := context.Background()
	exp, err := newLogsExporter(ctx, exportertest.NewNopSettings(metadata.Type), cfg, nsDialer(col.Netns()))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	const producers, batches, perBatch = 4, 10, 50
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				if err := exp.ConsumeLogs(ctx, logsOf(recordsWithPorts(20000+(p*batches+b)*perBatch, perBatch)...)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	const total = producers * batches * perBatch
	got := waitRecords(t, col, total)
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range got {
		seen[r.Fields["sourceTransportPort"]]++
	}
	for port := 20000; port < 20000+total; port++ {
		if n := seen[fmt.Sprint(port)]; n != 1 {
			t.Errorf("record with source port %d arrived %d times", port, n)
		}
	}
}
