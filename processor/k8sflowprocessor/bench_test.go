package k8sflowprocessor

import (
	"testing"

	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/attrcodec"
	"github.com/flowtel/flowtel/internal/flowrecord/compactcodec"
)

// BenchmarkEnrich measures enrich + classify of one record on the hot path
// (both endpoints resolved, Service looked up, flow type, side, correlation
// key). Target: ≤ 1 µs and ≤ 2 allocations.
func BenchmarkEnrich(b *testing.B) {
	procs := nodeProcessorsB(b)
	cases := map[string]flowCase{
		"pod_to_clusterip_remote_pod": moreCases(v4)[4],
		"issue8260_node_to_local_pod": issue8260Cases(v4)[0],
		"ipv6_pod_to_remote_pod":      antreaFindFlowTypeCases(v6)[4],
	}
	for name, c := range cases {
		b.Run(name, func(b *testing.B) {
			p := procs[c.reporter]
			tmpl := c.record()
			r := new(flowrecord.Record)
			b.ReportAllocs()
			for b.Loop() {
				*r = *tmpl
				if reason, _ := p.enrich(r); reason != "" {
					b.Fatal(reason)
				}
			}
		})
	}
}

func nodeProcessorsB(b *testing.B) map[string]*k8sFlowProcessor {
	b.Helper()
	clock := newFakeClock(t0.Add(10 * time.Minute))
	procs := map[string]*k8sFlowProcessor{}
	for _, n := range []string{"node-a", "node-b"} {
		procs[n], _ = startProcessor(b, nodeConfig(n), clock, clusterObjects()...)
	}
	return procs
}

// BenchmarkProcessLogs is the whole per-record cost in a pipeline: plog
// decode, enrich, plog encode (the codec dominates), for each encoding out.
func BenchmarkProcessLogs(b *testing.B) {
	for _, encoding := range []string{EncodingAttributes, EncodingCompact} {
		b.Run("encoding="+encoding, func(b *testing.B) {
			p := nodeProcessorsB(b)["node-a"]
			if encoding == EncodingCompact {
				p.encode = compactcodec.Encode
			}
			const batch = 100
			tmpl := plog.NewLogs()
			sl := tmpl.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
			for i := range batch {
				r := moreCases(v4)[4].record()
				r.Source.Port = uint16(10000 + i)
				attrcodec.Encode(r, sl.LogRecords().AppendEmpty())
			}
			ld := plog.NewLogs()
			b.ReportAllocs()
			for b.Loop() {
				tmpl.CopyTo(ld)
				if _, err := p.processLogs(b.Context(), ld); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
		})
	}
}
