package aggregate

import (
	"testing"

	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Antrea's BenchmarkAggregateRecordByFlowKey workload on typed records: one
// source and one destination record of the same inter-Node connection per
// op, IPv4 and IPv6. Antrea: ≈ 2.7 µs per pair (its aggregation benchmark);
// target ≤ 1.35 µs.
func BenchmarkAggregateRecordByFlowKey(b *testing.B) {
	for _, fam := range []struct {
		name string
		a    addrs
	}{{"ipv4", v4}, {"ipv6", v6}} {
		b.Run(fam.name, func(b *testing.B) {
			tbl := New(testSettings())
			src := srcHalf(fam.a, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionNone)
			dst := dstHalf(fam.a, flowrecord.FlowTypeInterNode, false, flowrecord.RuleActionNone)
			emit := func(*flowrecord.Record, Reason) {}
			b.ReportAllocs()
			cpu0 := benchcpu.Now()
			for b.Loop() {
				tbl.Add(src, at(1), emit)
				tbl.Add(dst, at(1), emit)
				if tbl.Len() != 1 {
					b.Fatal("one connection expected")
				}
			}
			b.ReportMetric(float64((benchcpu.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pair")
		})
	}
}

// The same, but each op pairs a new connection (first record inserted,
// second merged and exported), the work of a real pairing.
func BenchmarkPairNewConnection(b *testing.B) {
	const n = 1 << 16
	srcs, dsts := make([]*flowrecord.Record, n), make([]*flowrecord.Record, n)
	for i := range n {
		s := srcHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
		d := dstHalf(v4, flowrecord.FlowTypeInterNode, false, 0)
		s.Source.Port, d.Source.Port = uint16(i), uint16(i)
		s.Key, d.Key = s.CorrelationKey(), d.CorrelationKey()
		srcs[i], dsts[i] = s, d
	}
	emit := func(*flowrecord.Record, Reason) {}
	tbl := New(testSettings())
	i := 0
	b.ReportAllocs()
	cpu0 := benchcpu.Now()
	for b.Loop() {
		if i == n {
			tbl.Expire(at(1000), emit) // all forgotten: start over with the same keys
			i = 0
		}
		tbl.Add(srcs[i], at(1), emit)
		tbl.Add(dsts[i], at(1), emit)
		i++
	}
	b.ReportMetric(float64((benchcpu.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pair")
}
