package flowtable

import (
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/stretchr/testify/require"

	"github.com/flowtel/flowtel/internal/flowrecord/flowrecordtest"
)

// driverBatch is a batch of the driver's own columns, as PrepareBatch makes
// them for the flows table, without a server: what AppendTo and CopyTo
// write into. Only Columns and Column are used.
type driverBatch struct {
	driver.Batch
	cols []column.Interface
}

func newDriverBatch(t *testing.T) *driverBatch {
	b := &driverBatch{}
	for _, c := range Columns {
		col, err := column.Type(c.Type).Column(c.Name, &column.ServerContext{})
		require.NoError(t, err, c.Name)
		b.cols = append(b.cols, col)
	}
	return b
}

func (b *driverBatch) Columns() []column.Interface { return b.cols }

func (b *driverBatch) Column(i int) driver.BatchColumn { return batchColumn{b.cols[i]} }

type batchColumn struct{ col column.Interface }

func (c batchColumn) Append(v any) error {
	_, err := c.col.Append(v)
	return err
}

func (c batchColumn) AppendRow(v any) error { return c.col.AppendRow(v) }

// values reads every row of every column back through the driver's API.
func (b *driverBatch) values() [][]any {
	out := make([][]any, len(b.cols))
	for i, c := range b.cols {
		for j := range c.Rows() {
			out[i] = append(out[i], c.Row(j, false))
		}
	}
	return out
}

// AppendTo hands the driver's columns the block's values, whichever way it
// takes (sharing the block's buffers in the default build, copying in the
// flowtel_safe build): the driver reads back what its public Append of the
// same block holds, row for row.
func TestAppendToEqualsCopyTo(t *testing.T) {
	block := NewBlock(0)
	for range 3 {
		for _, r := range flowrecordtest.Records() {
			block.Add(&Row{Record: r, ClusterUUID: "cluster-a"})
		}
	}
	copied := newDriverBatch(t)
	require.NoError(t, block.CopyTo(copied))
	appended := newDriverBatch(t)
	shared, err := block.AppendTo(appended)
	require.NoError(t, err)
	require.Equal(t, SharesDriverColumns, shared, "the driver's columns are the ones this clickhouse-go version is known to have")
	want := copied.values()
	require.Len(t, want[0], block.Len())
	require.Equal(t, want, appended.values())
}
