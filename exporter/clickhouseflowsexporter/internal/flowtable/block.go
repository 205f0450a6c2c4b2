package flowtable

import (
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/flowtel/flowtel/internal/antreawire"
)

// Block is a batch of rows held column by column, so one INSERT appends each
// column to the driver as a single slice (no per-value reflection).
type Block struct {
	cols  []buffer
	rows  int
	texts antreawire.Texts
}

type buffer struct {
	i64 []int64 // DateTime as Unix seconds
	u8  []uint8
	u16 []uint16
	u64 []uint64
	str []string
}

// NewBlock returns an empty block with room for capacity rows.
func NewBlock(capacity int) *Block {
	b := &Block{cols: make([]buffer, len(Columns))}
	for i, c := range Columns {
		buf := &b.cols[i]
		switch c.kind {
		case kindTime:
			buf.i64 = make([]int64, 0, capacity)
		case kindUInt8:
			buf.u8 = make([]uint8, 0, capacity)
		case kindUInt16:
			buf.u16 = make([]uint16, 0, capacity)
		case kindUInt64:
			buf.u64 = make([]uint64, 0, capacity)
		case kindString, kindName, kindAddr, kindLabels:
			buf.str = make([]string, 0, capacity)
		}
	}
	return b
}

// Len is the number of rows in the block.
func (b *Block) Len() int { return b.rows }

// Add appends one row. The row's cluster UUID is what the clusterUUID column
// reads: Add sets it as row.Record's ClusterUID.
func (b *Block) Add(row *Row) {
	r := row.Record
	r.ClusterUID = row.ClusterUUID
	for i := range Columns {
		v := &Columns[i].value
		buf := &b.cols[i]
		switch Columns[i].kind {
		case kindTime:
			buf.i64 = append(buf.i64, int64(antreawire.UnixSeconds(v.Time(r))))
		case kindUInt8:
			buf.u8 = append(buf.u8, v.Uint8(r))
		case kindUInt16:
			buf.u16 = append(buf.u16, v.Uint16(r))
		case kindUInt64:
			buf.u64 = append(buf.u64, v.Uint64(r))
		case kindString:
			buf.str = append(buf.str, v.String(r))
		case kindName:
			buf.str = append(buf.str, v.Name(r))
		case kindAddr:
			buf.str = append(buf.str, b.texts.Addr(v.Addr(r)))
		case kindLabels:
			buf.str = append(buf.str, b.texts.Labels(v.Labels(r)))
		}
	}
	b.rows++
}

// Reset empties the block, keeping its memory (and its cache of address and
// label strings, for the next batch).
func (b *Block) Reset() {
	for i := range b.cols {
		buf := &b.cols[i]
		buf.i64, buf.u8, buf.u16, buf.u64 = buf.i64[:0], buf.u8[:0], buf.u16[:0], buf.u64[:0]
		clear(buf.str) // let the strings be collected
		buf.str = buf.str[:0]
	}
	b.rows = 0
}

// AppendTo appends every column to a batch prepared with InsertStatement.
func (b *Block) AppendTo(batch driver.Batch) error {
	for i := range Columns {
		buf := &b.cols[i]
		var v any
		switch Columns[i].kind {
		case kindTime:
			v = buf.i64
		case kindUInt8:
			v = buf.u8
		case kindUInt16:
			v = buf.u16
		case kindUInt64:
			v = buf.u64
		case kindString, kindName, kindAddr, kindLabels:
			v = buf.str
		}
		if err := batch.Column(i).Append(v); err != nil {
			return fmt.Errorf("column %s: %w", Columns[i].Name, err)
		}
	}
	return nil
}
