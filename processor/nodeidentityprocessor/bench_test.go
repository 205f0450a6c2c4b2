package nodeidentityprocessor

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// BenchmarkNodeIdentity: the gateway's cost of checking one request of 500
// node records, in both forms, with the sender's token already reviewed
// (the steady state: one TokenReview per token and cache_ttl). cpu-ns/op is
// per request; divide by 500 for a record.
func BenchmarkNodeIdentity(b *testing.B) {
	const perRequest = 500
	p, ctx := reviewed(b, componenttest.NewNopTelemetrySettings(), "node-a")
	for _, form := range forms {
		b.Run(form.name, func(b *testing.B) {
			ld := plog.NewLogs()
			lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
			for i := range perRequest {
				r := flowrecordtest.NodeHalf()
				r.Reporter.NodeName, r.Reporter.Side, r.Source.NodeName = "node-a", flowrecord.SideSource, "node-a"
				r.Source.Port = uint16(10000 + i)
				r.Key = r.CorrelationKey() // the key follows the tuple (node_identity checks it)
				form.encode(r, lrs.AppendEmpty())
			}
			benchcpu.Loop(b, func() {
				out, err := p.processLogs(ctx, ld)
				if err != nil || out.LogRecordCount() != perRequest {
					panic(fmt.Sprintf("%d records passed, %v", out.LogRecordCount(), err))
				}
			})
		})
	}
}
