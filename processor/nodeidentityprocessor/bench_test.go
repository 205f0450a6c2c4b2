package nodeidentityprocessor

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
	"github.com/flowtel/flowtel/processor/nodeidentityprocessor/internal/metadata"
)

// BenchmarkNodeIdentity: the gateway's cost of checking one request of 500
// node records, in both forms, with the sender's token already reviewed
// (the steady state: one TokenReview per token and cache_ttl). cpu-ns/op is
// per request; divide by 500 for a record.
func BenchmarkNodeIdentity(b *testing.B) {
	const perRequest = 500
	tel, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	if err != nil {
		b.Fatal(err)
	}
	cfg := createDefaultConfig()
	p := &nodeIdentity{cfg: cfg, logger: zap.NewNop(), tel: tel, rev: newReviewer(nil, cfg, tel)}
	const token = "token-of-node-a"
	p.rev.cache[sha256.Sum256([]byte(token))] = verdict{node: "node-a", expires: time.Now().Add(time.Hour)}
	ctx := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"authorization": {"Bearer " + token}})})

	for _, form := range []struct {
		name   string
		encode func(*flowrecord.Record, plog.LogRecord)
	}{{"compact", compactcodec.Encode}, {"attributes", attrcodec.Encode}} {
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
