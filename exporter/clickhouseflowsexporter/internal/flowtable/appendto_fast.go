//go:build !flowtel_safe

package flowtable

import (
	"reflect"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// AppendTo puts every column into a batch prepared with InsertStatement.
// (The flowtel_safe build leaves this file out: its AppendTo copies, see
// appendto_safe.go.)
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
// through the public Append (CopyTo), and shared is false. A batch with more
// columns than Columns (InsertTimeStatement's) gets the block's columns
// first; the caller appends the others.
func (b *Block) AppendTo(batch driver.Batch) (shared bool, err error) {
	cols := batch.Columns()
	if len(cols) < len(Columns) {
		return false, b.CopyTo(batch)
	}
	cols = cols[:len(Columns)]
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

// SharesDriverColumns: AppendTo shares the block's buffers with the driver in
// this build (when the driver's columns are the ones it knows).
const SharesDriverColumns = true
