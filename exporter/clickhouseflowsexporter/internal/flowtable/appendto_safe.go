//go:build flowtel_safe

package flowtable

import "github.com/ClickHouse/clickhouse-go/v2/lib/driver"

// AppendTo puts every column into a batch prepared with InsertStatement,
// through the driver's public Append (CopyTo): the flowtel_safe build does
// not point the driver's columns at the block's buffers (appendto_fast.go),
// so shared is always false.
func (b *Block) AppendTo(batch driver.Batch) (shared bool, err error) {
	return false, b.CopyTo(batch)
}

// SharesDriverColumns: AppendTo copies in this build.
const SharesDriverColumns = false
