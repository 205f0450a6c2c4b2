package flowtable

import (
	"fmt"
	"net/netip"
	"reflect"
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/flowtel/flowtel/internal/antreawire"
	"github.com/flowtel/flowtel/internal/flowrecord"
)

// Block is a batch of rows held column by column, in the column types the
// driver itself encodes (ch-go's proto columns), so that an insert hands the
// columns to the driver without copying them (AppendTo). A Block keeps its
// memory across Reset, so a pooled Block stops allocating once it has held
// the largest batch; none of its memory holds pointers, so the garbage
// collector does not scan it.
type Block struct {
	cols  []buffer
	rows  int
	texts antreawire.Texts

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

// filler is a column's buffer and the accessor of the value it holds.
type filler[C any, V any] struct {
	buf *C
	get func(*flowrecord.Record) V
}

// NewBlock returns an empty block with room for capacity rows.
func NewBlock(capacity int) *Block {
	b := &Block{cols: make([]buffer, len(Columns))}
	for i := range Columns {
		buf, v := &b.cols[i], &Columns[i].value
		switch Columns[i].kind {
		case kindTime:
			buf.time.Data = make([]proto.DateTime, 0, capacity)
			b.times = append(b.times, filler[proto.ColDateTime, time.Time]{&buf.time, v.Time})
		case kindUInt8:
			buf.u8 = make(proto.ColUInt8, 0, capacity)
			b.u8s = append(b.u8s, filler[proto.ColUInt8, uint8]{&buf.u8, v.Uint8})
		case kindUInt16:
			buf.u16 = make(proto.ColUInt16, 0, capacity)
			b.u16s = append(b.u16s, filler[proto.ColUInt16, uint16]{&buf.u16, v.Uint16})
		case kindUInt64:
			buf.u64 = make(proto.ColUInt64, 0, capacity)
			b.u64s = append(b.u64s, filler[proto.ColUInt64, uint64]{&buf.u64, v.Uint64})
		case kindString:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.strs = append(b.strs, filler[proto.ColStr, string]{&buf.str, v.String})
		case kindName:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.strs = append(b.strs, filler[proto.ColStr, string]{&buf.str, v.Name})
		case kindAddr:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.addrs = append(b.addrs, filler[proto.ColStr, netip.Addr]{&buf.str, v.Addr})
		case kindLabels:
			buf.str.Pos = make([]proto.Position, 0, capacity)
			b.labels = append(b.labels, filler[proto.ColStr, map[string]string]{&buf.str, v.Labels})
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
	for _, c := range b.times {
		c.buf.AppendRaw(proto.DateTime(antreawire.UnixSeconds(c.get(r))))
	}
	for _, c := range b.u8s {
		c.buf.Append(c.get(r))
	}
	for _, c := range b.u16s {
		c.buf.Append(c.get(r))
	}
	for _, c := range b.u64s {
		c.buf.Append(c.get(r))
	}
	for _, c := range b.strs {
		c.buf.Append(c.get(r))
	}
	for _, c := range b.addrs {
		c.buf.Append(b.texts.Addr(c.get(r)))
	}
	for _, c := range b.labels {
		c.buf.Append(b.texts.Labels(c.get(r)))
	}
	b.rows++
}

// Reset empties the block, keeping its memory (and its cache of address and
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

// AppendTo puts every column into a batch prepared with InsertStatement.
//
// The driver's public Append copies a column's values into column buffers
// it allocates for every batch and grows value by value, and that copying
// and the garbage it leaves cost the client about as much as encoding and
// sending the block. So when the driver's columns are the ones this version
// of clickhouse-go is known to have (a struct whose field col is the ch-go
// column, checked through reflect on every call), AppendTo points them at the
// block's own buffers instead. The driver only reads them (to encode the
// block in Send), and the batch is done with them when Send or Abort
// returns: the block must not be changed before that. Otherwise it copies
// through the public Append (CopyTo), and shared is false.
func (b *Block) AppendTo(batch driver.Batch) (shared bool, err error) {
	cols := batch.Columns()
	if len(cols) != len(Columns) {
		return false, b.CopyTo(batch)
	}
	type target struct {
		i   int
		ptr unsafe.Pointer
	}
	targets := make([]target, 0, len(cols))
	for i, c := range cols {
		var ptr unsafe.Pointer
		switch Columns[i].kind {
		case kindTime:
			ptr = driverColumn[proto.ColDateTime](c)
		case kindUInt8:
			ptr = driverColumn[proto.ColUInt8](c)
		case kindUInt16:
			ptr = driverColumn[proto.ColUInt16](c)
		case kindUInt64:
			ptr = driverColumn[proto.ColUInt64](c)
		default:
			ptr = driverColumn[proto.ColStr](c)
		}
		if ptr == nil || c.Rows() != 0 {
			return false, b.CopyTo(batch)
		}
		targets = append(targets, target{i, ptr})
	}
	for _, t := range targets {
		buf := &b.cols[t.i]
		switch Columns[t.i].kind {
		case kindTime:
			(*proto.ColDateTime)(t.ptr).Data = buf.time.Data // the driver's Location stays
		case kindUInt8:
			*(*proto.ColUInt8)(t.ptr) = buf.u8
		case kindUInt16:
			*(*proto.ColUInt16)(t.ptr) = buf.u16
		case kindUInt64:
			*(*proto.ColUInt64)(t.ptr) = buf.u64
		default:
			*(*proto.ColStr)(t.ptr) = buf.str
		}
	}
	return true, nil
}

// driverColumn is the address of the ch-go column of type T that the driver's
// column c holds in its field col, nil when c is not a pointer to a struct
// with such a field.
func driverColumn[T any](c column.Interface) unsafe.Pointer {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("col")
	if !f.IsValid() || f.Type() != reflect.TypeFor[T]() {
		return nil
	}
	return unsafe.Pointer(f.UnsafeAddr())
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
