package flowtable

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/flowtel/flowtel/internal/antreawire"
	"github.com/flowtel/flowtel/internal/flowrecord"
	"github.com/flowtel/flowtel/internal/flowrecord/catalogue"
)

// Block is a batch of rows held column by column, in the column types the
// driver itself encodes (ch-go's proto columns), so that an insert hands the
// columns to the driver without copying them (AppendTo). A Block keeps its
// memory across Reset, so a pooled Block stops allocating once it has held
// the largest batch; none of its memory holds pointers, so the garbage
// collector does not scan it.
type Block struct {
	cols []buffer
	rows int
	// The textual forms of the addresses (IPv6 ones: IPv4 ones are written
	// directly) and of the label sets, per column, so that a column's value
	// repeated in the next row is found without a lookup.
	addrTexts, labelTexts []antreawire.Texts

	// The columns by kind, each with its value's accessor, so that Add
	// fills them kind after kind without a switch per column.
	times  []filler[proto.ColDateTime, time.Time]
	u8s    []filler[proto.ColUInt8, uint8]
	u16s   []filler[proto.ColUInt16, uint16]
	u64s   []filler[proto.ColUInt64, uint64]
	strs   []filler[proto.ColStr, string] // String and enumeration names
	addrs  []filler[proto.ColStr, netip.Addr]
	labels []filler[proto.ColStr, map[string]string]
}

// buffer is one column's values; the field of the column's kind is used.
type buffer struct {
	time proto.ColDateTime // Unix seconds
	u8   proto.ColUInt8
	u16  proto.ColUInt16
	u64  proto.ColUInt64
	str  proto.ColStr
}

// filler is a column's buffer and the reader of the value it holds: direct
// (no call) when the column carries a Record field as it is, by its Ref.
type filler[C any, V any] struct {
	buf  *C
	read catalogue.Reader[V]
}

func newFiller[C any, V any](buf *C, get func(*flowrecord.Record) V, ref catalogue.Ref) filler[C, V] {
	return filler[C, V]{buf: buf, read: catalogue.NewReader(ref, get)}
}

// NewBlock returns an empty block with room for capacity rows.
func NewBlock(capacity int) *Block {
	b := &Block{cols: make([]buffer, len(Columns))}
	for i := range Columns {
		buf, v := &b.cols[i], &Columns[i].value
		switch Columns[i].kind {
		case kindTime:
			buf.time.Data = make([]proto.DateTime, 0, capacity)
			b.times = append(b.times, newFiller[proto.ColDateTime, time.Time](&buf.time, v.Time, Columns[i].ref))
		case kindUInt8:
			buf.u8 = make(proto.ColUInt8, 0, capacity)
			b.u8s = append(b.u8s, newFiller[proto.ColUInt8, uint8](&buf.u8, v.Uint8, Columns[i].ref))
		case kindUInt16:
			buf.u16 = make(proto.ColUInt16, 0, capacity)
			b.u16s = append(b.u16s, newFiller[proto.ColUInt16, uint16](&buf.u16, v.Uint16, Columns[i].ref))
		case kindUInt64:
			buf.u64 = make(proto.ColUInt64, 0, capacity)
			b.u64s = append(b.u64s, newFiller[proto.ColUInt64, uint64](&buf.u64, v.Uint64, Columns[i].ref))
		case kindString:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.strs = append(b.strs, newFiller[proto.ColStr, string](&buf.str, v.String, Columns[i].ref))
		case kindName:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.strs = append(b.strs, newFiller[proto.ColStr, string](&buf.str, v.Name, catalogue.Ref{}))
		case kindAddr:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.addrs = append(b.addrs, newFiller[proto.ColStr, netip.Addr](&buf.str, v.Addr, Columns[i].ref))
		case kindLabels:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.labels = append(b.labels, newFiller[proto.ColStr, map[string]string](&buf.str, v.Labels, catalogue.Ref{}))
		}
	}
	b.addrTexts = make([]antreawire.Texts, len(b.addrs))
	b.labelTexts = make([]antreawire.Texts, len(b.labels))
	return b
}

// Len is the number of rows in the block.
func (b *Block) Len() int { return b.rows }

// Add appends one row, as AddRows does.
func (b *Block) Add(row *Row) { b.AddRows([]Row{*row}) }

// AddRows appends rows. A row's cluster UUID is what the clusterUUID column
// reads: AddRows sets it as its Record's ClusterUID.
//
// It fills the block column after column, each column for all of rows: a
// column's buffers stay in registers and its accessor is called for row
// after row, which costs about half of filling row after row (every column
// for one row) when rows are a few dozen. The rows' Records must be distinct.
func (b *Block) AddRows(rows []Row) {
	for i := range rows {
		rows[i].Record.ClusterUID = rows[i].ClusterUUID
	}
	for _, c := range b.times {
		col := c.buf.Data
		for i := range rows {
			col = append(col, proto.DateTime(antreawire.UnixSeconds(c.read.Get(rows[i].Record))))
		}
		c.buf.Data = col
	}
	for _, c := range b.u8s {
		col := *c.buf
		for i := range rows {
			col = append(col, c.read.Get(rows[i].Record))
		}
		*c.buf = col
	}
	for _, c := range b.u16s {
		col := *c.buf
		for i := range rows {
			col = append(col, c.read.Get(rows[i].Record))
		}
		*c.buf = col
	}
	for _, c := range b.u64s {
		col := *c.buf
		for i := range rows {
			col = append(col, c.read.Get(rows[i].Record))
		}
		*c.buf = col
	}
	for _, c := range b.strs {
		buf, pos := c.buf.Buf, c.buf.Pos
		for i := range rows {
			s := c.read.Get(rows[i].Record)
			start := len(buf)
			buf = append(buf, s...)
			pos = append(pos, proto.Position{Start: start, End: len(buf)})
		}
		c.buf.Buf, c.buf.Pos = buf, pos
	}
	for j, c := range b.addrs {
		t := &b.addrTexts[j]
		buf, pos := c.buf.Buf, c.buf.Pos
		for i := range rows {
			a := c.read.Get(rows[i].Record)
			start := len(buf)
			if a.Is4() {
				buf = a.AppendTo(buf)
			} else {
				buf = append(buf, t.Addr(a)...)
			}
			pos = append(pos, proto.Position{Start: start, End: len(buf)})
		}
		c.buf.Buf, c.buf.Pos = buf, pos
	}
	for j, c := range b.labels {
		t := &b.labelTexts[j]
		for i := range rows {
			c.buf.Append(t.Labels(c.read.Get(rows[i].Record)))
		}
	}
	b.rows += len(rows)
}

// Reset empties the block, keeping its memory (and its caches of address and
// label strings, for the next batch).
func (b *Block) Reset() {
	for i := range b.cols {
		buf := &b.cols[i]
		buf.time.Reset()
		buf.u8.Reset()
		buf.u16.Reset()
		buf.u64.Reset()
		buf.str.Reset()
	}
	b.rows = 0
}

// CopyTo appends every column to a batch prepared with InsertStatement
// through the driver's public Append, as typed slices (Slices).
func (b *Block) CopyTo(batch driver.Batch) error {
	for i, v := range b.Slices() {
		if err := batch.Column(i).Append(v); err != nil {
			return fmt.Errorf("column %s: %w", Columns[i].Name, err)
		}
	}
	return nil
}

// Slices returns the columns as the Go slices the driver's Append takes:
// []int64 (DateTime, Unix seconds), []uint8, []uint16, []uint64, []string.
// The numeric slices share the block's memory.
func (b *Block) Slices() []any {
	out := make([]any, len(Columns))
	for i := range Columns {
		buf := &b.cols[i]
		switch Columns[i].kind {
		case kindTime:
			s := make([]int64, len(buf.time.Data))
			for j, d := range buf.time.Data {
				s[j] = int64(d)
			}
			out[i] = s
		case kindUInt8:
			out[i] = []uint8(buf.u8)
		case kindUInt16:
			out[i] = []uint16(buf.u16)
		case kindUInt64:
			out[i] = []uint64(buf.u64)
		default:
			s := make([]string, len(buf.str.Pos))
			for j := range s {
				s[j] = buf.str.Row(j)
			}
			out[i] = s
		}
	}
	return out
}
