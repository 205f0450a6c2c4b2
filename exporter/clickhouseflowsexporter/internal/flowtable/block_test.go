package flowtable

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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

// BenchmarkAddRows measures adding decoded records to a block in chunks of
// 32, as the exporter does, for a default-sized batch of 20,000 rows.
func BenchmarkAddRows(b *testing.B) {
	var rows []Row
	for len(rows) < 32 {
		for _, r := range flowrecordtest.Records() {
			rows = append(rows, Row{Record: r, ClusterUUID: "c"})
		}
	}
	rows = rows[:32]
	block := NewBlock(20000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(rows) {
		block.AddRows(rows)
		if block.Len() > 20000-len(rows) {
			block.Reset()
		}
	}
}

// TestAddRowsAgree checks that rows added in chunks of any size give the
// columns that adding them one by one gives, and that the address and label
// columns (written directly or through per-column caches) hold what
// netip.Addr.String and encoding/json write.
func TestAddRowsAgree(t *testing.T) {
	var rows []Row
	for n := range 4 {
		for i, r := range flowrecordtest.Records() {
			for range i % 3 { // runs of the same values, for the caches
				rows = append(rows, Row{Record: r, ClusterUUID: fmt.Sprint("cluster-", n)})
				r = flowrecordtest.Records()[i]
			}
			rows = append(rows, Row{Record: r, ClusterUUID: fmt.Sprint("cluster-", n)})
		}
	}
	one := NewBlock(0)
	for i := range rows {
		one.Add(&rows[i])
	}
	want := one.Slices()
	for _, size := range []int{1, 2, 5, 32, len(rows)} {
		block := NewBlock(0)
		for start := 0; start < len(rows); start += size {
			block.AddRows(rows[start:min(start+size, len(rows))])
		}
		require.Equal(t, want, block.Slices(), "chunks of %d", size)
	}
	for i, c := range Columns {
		for j, row := range rows {
			var text string
			switch c.kind {
			case kindAddr:
				if a := c.value.Addr(row.Record); a.IsValid() {
					text = a.String()
				}
			case kindLabels:
				if m := c.value.Labels(row.Record); m != nil {
					b, err := json.Marshal(m)
					require.NoError(t, err)
					text = string(b)
				}
			default:
				continue
			}
			require.Equal(t, text, want[i].([]string)[j], "column %s, row %d", c.Name, j)
		}
	}
}

// Most columns are read directly through their field's Ref (that the Ref
// reads what the column's Value reads is catalogue's
// TestWiresCarryTheFieldsRef; what the block holds, the golden tests').
func TestMostColumnsReadDirectly(t *testing.T) {
	b := NewBlock(0)
	direct := countDirect(b.times) + countDirect(b.u8s) + countDirect(b.u16s) +
		countDirect(b.u64s) + countDirect(b.strs) + countDirect(b.addrs) + countDirect(b.labels)
	require.Greater(t, direct, len(Columns)*3/4)
	require.Zero(t, countDirect(b.labels), "labels are written as JSON, through their Value")
}

func countDirect[C any, V any](fs []filler[C, V]) int {
	n := 0
	for _, c := range fs {
		if c.read.Direct() {
			n++
		}
	}
	return n
}
