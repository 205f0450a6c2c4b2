//go:build integration

package clickhouseflowsexporter

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/exporter/clickhouseflowsexporter/internal/flowtable"
)

// BenchmarkFillBlock measures fillBlock alone (decode and column fill, no
// server) over one default-sized batch, as PushBatch runs it: the part of
// PushBatch's client CPU that the driver floor does not have.
func BenchmarkFillBlock(b *testing.B) {
	e := &flowsExporter{cfg: &Config{}}
	ld := plog.NewLogs()
	for _, part := range benchLogs(defaultMinRows / 1000) {
		part.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
	}
	block := flowtable.NewBlock(defaultMinRows)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for range b.N {
		block.Reset()
		if bad, err := e.fillBlock(block, ld); bad > 0 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N*defaultMinRows), "cpu-ns/row")
}
