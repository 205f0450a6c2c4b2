package layout

import (
	"testing"

	"github.com/flowtel/flowtel/internal/benchcpu"
	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// BenchmarkAppendRecordAggregate measures encoding one decoded record as a
// data record of the aggregate layout (defaults), without decoding or I/O;
// cpu-ns/record is steadier than ns/op on a shared machine.
func BenchmarkAppendRecordAggregate(b *testing.B) {
	v4, _, err := New(Options{Kind: Aggregate, IncludeK8sNames: true})
	if err != nil {
		b.Fatal(err)
	}
	r := flowrecordtest.Full(false)
	r.ClusterUID = "cluster"
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	cpu0 := benchcpu.Now()
	for b.Loop() {
		if buf, err = v4.AppendRecord(buf[:0], r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((benchcpu.Now()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/record")
}
