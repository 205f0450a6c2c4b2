package flowtable

import (
	"testing"

	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// BenchmarkAdd measures adding a decoded record to a block, for a
// default-sized batch of 20,000 rows.
func BenchmarkAdd(b *testing.B) {
	recs := flowrecordtest.Records()
	rows := make([]Row, len(recs))
	for i, r := range recs {
		rows[i] = Row{Record: r, ClusterUUID: "c"}
	}
	block := NewBlock(20000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		block.Add(&rows[i%len(rows)])
		if block.Len() == 20000 {
			block.Reset()
		}
	}
}
