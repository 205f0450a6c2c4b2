package flowcorrelationprocessor

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/aggregate"
	"github.com/flowtel/flowtel/processor/flowcorrelationprocessor/internal/metadata"
)

// realisticHalves are the two halves of connection i with the identity a
// node collector fills (Pods, Nodes, workloads, labels, Service, policy).
func realisticHalves(i int) (src, dst *flowrecord.Record) {
	src, dst = interNode(i, t0.Add(5*time.Second), uint64(1000+i), uint64(1010+i))
	for _, r := range []*flowrecord.Record{src, dst} {
		r.Source.Address = netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)})
		r.Source.Port = uint16(i)
		r.Destination.Address = netip.AddrFrom4([4]byte{10, 2, byte(i >> 16), byte(i >> 8)})
		r.ReverseStats = flowrecord.Counters{PacketTotal: 9, OctetTotal: 9000}
		r.TCPState, r.EndReason = "ESTABLISHED", flowrecord.EndReasonActiveTimeout
		r.Conntrack = flowrecord.Conntrack{ID: uint32(i), Zone: 65520, Mark: 0x21}
		r.Key = r.CorrelationKey()
	}
	src.Source.PodName, src.Source.PodUID = fmt.Sprintf("web-7d9f-%05d", i%100000), "0b6f7a4e-1111-4c3e-9d0a-6a1d2b3c4d5e"
	src.Source.PodLabels = map[string]string{"app": "web", "tier": "front"}
	src.Source.WorkloadKind, src.Source.WorkloadName = "Deployment", "web"
	src.OriginalDestinationAddress, src.OriginalDestinationPort = netip.MustParseAddr("10.96.0.20"), 80
	src.Service = flowrecord.Service{PortName: "shop/api:http", Address: netip.MustParseAddr("10.96.0.20"), Port: 80}
	dst.Destination.PodName, dst.Destination.PodUID = "api-0", "0b6f7a4e-2222-4c3e-9d0a-6a1d2b3c4d5e"
	dst.Destination.PodLabels = map[string]string{"app": "api"}
	dst.Destination.WorkloadKind, dst.Destination.WorkloadName = "StatefulSet", "api"
	dst.IngressPolicy = flowrecord.Policy{Type: flowrecord.PolicyTypeK8sNetworkPolicy, Namespace: "shop", Name: "allow-web", RuleAction: flowrecord.RuleActionAllow}
	return src, dst
}

// Pairing + aggregation throughput through the processor, plog decode of
// every received record and encode of every emitted one included: each op is
// one batch of 100 new connections' source halves followed by one batch of
// their destination halves (as two Nodes send them), 200 records in, 100
// pairs out. Connections are forgotten by the timers and their keys reused.
func BenchmarkConsumeLogsPairing(b *testing.B) {
	// Node records as k8s_flow writes them: the attribute form, and the
	// compact one of the shipped node configuration (decision D13).
	for _, enc := range []struct {
		name   string
		encode func(*flowrecord.Record, plog.LogRecord)
	}{{"attributes", attrcodec.Encode}, {"compact", compactcodec.Encode}} {
		b.Run("encoding="+enc.name, func(b *testing.B) { benchmarkPairing(b, enc.encode, processortest.NewNopSettings(metadata.Type)) })
	}
	// With the SDK's meters, as in a collector, instead of no-op ones: what
	// the processor's own metrics cost.
	b.Run("encoding=compact,telemetry=sdk", func(b *testing.B) {
		set := processortest.NewNopSettings(metadata.Type)
		tel := componenttest.NewTelemetry()
		defer func() { _ = tel.Shutdown(ctx) }()
		set.TelemetrySettings = tel.NewTelemetrySettings()
		benchmarkPairing(b, compactcodec.Encode, set)
	})
}

func benchmarkPairing(b *testing.B, encode func(*flowrecord.Record, plog.LogRecord), set processor.Settings) {
	const pairsPerBatch, rounds = 100, 100 // 10k distinct connections
	var srcBatches, dstBatches []plog.Logs
	for r := range rounds {
		var srcs, dsts []*flowrecord.Record
		for j := range pairsPerBatch {
			s, d := realisticHalves(r*pairsPerBatch + j)
			srcs, dsts = append(srcs, s), append(dsts, d)
		}
		srcBatches, dstBatches = append(srcBatches, encodedLogs(encode, srcs...)), append(dstBatches, encodedLogs(encode, dsts...))
	}
	clk := newFakeClock()
	p, err := newProcessor(set, aggregateConfig(), consumertest.NewNop(), clk)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Shutdown(ctx) }()
	r := 0
	b.ReportAllocs()
	cpu0 := benchcpu.Now()
	for b.Loop() {
		if r == rounds {
			clk.mu.Lock()
			clk.now = clk.now.Add(200 * time.Second)
			clk.mu.Unlock()
			p.onTick(ctx) // forget every connection; same keys start over as new ones
			r = 0
		}
		_ = p.ConsumeLogs(ctx, srcBatches[r])
		_ = p.ConsumeLogs(ctx, dstBatches[r])
		r++
	}
	cpu := benchcpu.Now() - cpu0
	pairs := float64(b.N * pairsPerBatch)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pairs, "ns/pair")
	b.ReportMetric(float64(cpu.Nanoseconds())/pairs, "cpu-ns/pair")
	b.ReportMetric(2*pairs/cpu.Seconds(), "records/cpu-s")
}

// Memory held per pending half: 100k source halves (decoded from plog, as
// they arrive) waiting for their peers.
func BenchmarkMemoryPer100kPending(b *testing.B) {
	const n = 100_000
	lds := make([]plog.Logs, 0, n/1000)
	for k := range n / 1000 {
		var srcs []*flowrecord.Record
		for j := range 1000 {
			s, _ := realisticHalves(k*1000 + j)
			srcs = append(srcs, s)
		}
		lds = append(lds, logsOf(srcs...))
	}
	var perRecord float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tbl := aggregate.New(aggregate.Settings{ActiveTimeout: time.Minute, InactiveTimeout: time.Minute, PairingTimeout: time.Hour})
		var r flowrecord.Record
		emit := func(*flowrecord.Record, aggregate.Reason) {}
		for _, ld := range lds {
			lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			for i := range lrs.Len() {
				if err := attrcodec.Decode(lrs.At(i), &r); err != nil {
					b.Fatal(err)
				}
				tbl.Add(&r, t0, emit)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if tbl.Pending() != n {
			b.Fatalf("pending = %d", tbl.Pending())
		}
		perRecord = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(tbl)
	}
	b.ReportMetric(perRecord, "B/pending")
	b.ReportMetric(perRecord*n/(1<<20), "MiB/100k")
}
